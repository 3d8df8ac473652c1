"""The fleet service's loop without a broker: a cluster that does not answer is probed once an
interval and its jobs reported from that probe; a reload keeps the last good conf when the new one
is broken, and adds and removes jobs when it is good."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from recovery.errors import InvalidInput
from recovery.fleet import JobResult, in_shard
from recovery.watch import FleetWatch, _Probe

DEAD = '[cluster.dead]\nbootstrap_servers = "127.0.0.1:1"\ntimeout = "1s"\n'


def job(name: str, checkpoint: Path) -> str:
    return f'[job.{name}]\ncluster = "dead"\ncheckpoint = "{checkpoint}"\n'


def until(probe: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := probe():
            return value
        time.sleep(0.05)
    raise AssertionError("not within the time")


def test_a_dead_cluster_is_probed_once_an_interval_and_its_jobs_are_unreachable(tmp_path: Path) -> None:
    conf = tmp_path / "conf.toml"
    conf.write_text(DEAD + job("a", tmp_path) + job("b", tmp_path))
    watch = FleetWatch(conf, interval_s=0.5, parallel=2)
    stop = threading.Event()
    runner = threading.Thread(target=watch.run, args=(stop,))
    runner.start()
    try:
        checks = until(lambda: len(s := watch.snapshot()) == 2 and s)
        assert {c.result.verdict for c in checks.values()} == {"UNREACHABLE"}
        assert all(
            "cluster dead" in (c.result.failure.message if c.result.failure else "") for c in checks.values()
        )
        assert all(c.last_success_ms is None for c in checks.values())
        until(lambda: min(watch.check_errors().get((n, "unreachable"), 0) for n in "ab") >= 2)
    finally:
        stop.set()
        runner.join(timeout=30)
    assert not runner.is_alive()


def test_a_broken_reload_keeps_the_last_good_conf_and_a_good_one_replaces_it(tmp_path: Path) -> None:
    conf = tmp_path / "conf.toml"
    conf.write_text(DEAD + job("a", tmp_path))
    watch = FleetWatch(conf, interval_s=60)

    conf.write_text("[job.a\n")
    error = watch.reload()
    assert error is not None and "conf.toml" in error and watch.last_reload_error == error
    assert list(watch.conf.jobs) == ["a"] and watch.reloads == {"success": 0, "failure": 1}

    conf.write_text(DEAD + job("b", tmp_path) + job("c", tmp_path))
    assert watch.reload() is None and watch.last_reload_error is None
    assert sorted(watch.conf.jobs) == ["b", "c"] and watch.reloads == {"success": 1, "failure": 1}


def test_bad_settings_are_refused_naming_the_parameter(tmp_path: Path) -> None:
    conf = tmp_path / "conf.toml"
    conf.write_text(DEAD + job("a", tmp_path))
    with pytest.raises(InvalidInput, match=r"^interval_s must be positive"):
        FleetWatch(conf, interval_s=0)
    with pytest.raises(InvalidInput, match=r"^parallel must be at least 1"):
        FleetWatch(conf, parallel=0)


def test_shards_split_the_jobs_each_to_exactly_one_replica_and_stay_put(tmp_path: Path) -> None:
    names = [f"job-{i:03d}" for i in range(300)]
    conf = tmp_path / "conf.toml"
    conf.write_text(DEAD + "".join(job(n, tmp_path) for n in names))
    watches = [FleetWatch(conf, shard=(i, 3)) for i in range(3)]
    shards = [set(w.conf.jobs) for w in watches]
    assert sorted(n for shard in shards for n in shard) == names  # every job once
    assert all(70 <= len(shard) <= 130 for shard in shards)  # and spread
    # the hash is CRC-32 of the name: the same in every process and release (not Python's hash())
    assert [in_shard("orders-to-delta", (i, 3)) for i in range(3)] == [False, True, False]
    # a reload keeps the shard: a job added lands in one replica only
    conf.write_text(DEAD + "".join(job(n, tmp_path) for n in [*names, "new-job"]))
    assert all(w.reload() is None for w in watches)
    assert sum("new-job" in w.conf.jobs for w in watches) == 1
    assert all(set(w.conf.jobs) - {"new-job"} == shard for w, shard in zip(watches, shards, strict=True))
    with pytest.raises(InvalidInput, match=r"^shard must be I of N with 0 <= I < N, not 3 of 3"):
        FleetWatch(conf, shard=(3, 3))


def test_due_jobs_go_in_batches_and_the_most_overdue_batch_waits_for_room(tmp_path: Path) -> None:
    # Batches of about BATCH_PARTITIONS, at most IN_FLIGHT_PARTITIONS checked at once; a batch that
    # does not fit goes next, before any smaller batch of another cluster takes its room.
    conf = tmp_path / "conf.toml"
    other = DEAD.replace("cluster.dead", "cluster.other")
    jobs = job("big", tmp_path) + "".join(
        job(f"s{i}", tmp_path).replace('"dead"', '"other"') for i in range(60)
    )
    conf.write_text(DEAD + other + jobs)
    watch = FleetWatch(conf, interval_s=60, parallel=8)
    state, now = watch._state, time.monotonic()
    for name in watch.conf.clusters:  # both answered just now: their jobs are checked, not probed
        state.probes[name] = _Probe(at=now)
    state.sizes = {"big": 30_000} | {f"s{i}": 200 for i in range(60)}  # 60 x 200: 3 batches of 25
    state.due = {name: 0.0 for name in watch.conf.jobs} | {"big": -1.0}  # big: the most overdue

    state.in_flight = 1_000  # another check running: big does not fit, and nothing overtakes it
    assert watch._due(now) == []
    assert watch._due(now) == []  # looked at again only once a batch or probe ended
    state.in_flight, state.ended_work = 0, 1  # it ended: big goes alone, even beyond the limit
    tasks = watch._due(now)
    assert [[j.name for j in task.args[0]] for task in tasks] == [["big"]]
    assert state.in_flight == 30_000 and state.running == {"big"}
    state.in_flight, state.running, state.ended_work = 0, set(), 2
    del state.due["big"]
    sizes = [task.args[1] for task in watch._due(now)]
    assert sizes == [5_000, 5_000, 2_000]  # every small job, in three batches under the limit


def test_a_job_recorded_due_sooner_than_the_kept_wake_time_is_started_when_due(tmp_path: Path) -> None:
    # The scheduler keeps the next due time until work ends; a job of a batch still ending (its
    # hold, its series) may be recorded due sooner than that time: it is started when due, not
    # when its batch ends.
    conf = tmp_path / "conf.toml"
    conf.write_text(DEAD + job("slow", tmp_path) + job("fast", tmp_path) + 'interval = "1s"\n')
    watch = FleetWatch(conf, interval_s=60, parallel=8)
    state, now = watch._state, time.monotonic()
    state.probes["dead"] = _Probe(at=now)
    state.due = {"slow": now + 50, "fast": now - 1}
    state.running = {"fast"}  # being checked: not waiting
    assert watch._due(now) == [] and state.wake == (state.ended_work, now + 50)

    watch._record(watch.conf.jobs["fast"], JobResult(watch.conf.jobs["fast"]), 0.1, None)
    due = state.due["fast"]
    assert due < now + 50 and state.ended_work == 0  # its batch has not ended yet
    state.probes["dead"].at = due  # the cluster answered since: the job is checked, not probed
    tasks = watch._due(due + 0.01)
    assert [[j.name for j in task.args[0]] for task in tasks] == [["fast"]]


def test_a_probe_that_fails_on_a_bug_is_said_and_its_jobs_are_checked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Before, a probe that raised left its cluster "being probed" forever: none of its jobs was
    # checked again (and with the scheduler waiting for work to end, no other cluster's either).
    from recovery import watch as watch_module

    def broken(cluster: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(watch_module, "probe_cluster", broken)
    conf = tmp_path / "conf.toml"
    conf.write_text(DEAD + job("a", tmp_path))
    watch = FleetWatch(conf, interval_s=60, parallel=2)
    watch._probe(watch.conf.clusters["dead"])
    probe = watch._state.probes["dead"]
    assert not probe.running and watch._state.ended_work == 1
    assert probe.failure is not None and "internal error: RuntimeError('a bug')" in probe.failure.message
    assert "cluster dead: the probe failed" in caplog.text
