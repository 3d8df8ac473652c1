"""``apply(plan, checkpoint=chk)`` on S3 (a real S3 API server, moto) with a plan made before the lock,
as ``repair --execute`` makes it: the handle is checked under the lock with one LIST of offsets/ and
of commits/ (and the lock's own listing of _recovery/) instead of being read again (issue 11), every
refusal still holds, and a refused plan or bad input writes nothing at all. Needs the broker: run
through the rig semaphore."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from chk_builder import META, checkpoint_files, kafka_json

import recovery.apply as apply_module
from recovery.api import repair_checkpoint
from recovery.apply import apply
from recovery.checkpoint import open_checkpoint
from recovery.checkpoint.heartbeat import write_heartbeat
from recovery.core.model import Plan
from recovery.core.plan import decide_repair, resolve_sink
from recovery.errors import CheckpointInUse, PlanOutdated
from recovery.kafka.config import KafkaConfig
from recovery.resume import checkpoint_view, cluster_for


@pytest.fixture
def s3_chk(
    s3_endpoint: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> Iterator[tuple[Any, str, dict[str, str], str]]:
    """(s3fs, checkpoint URL, storage options, topic): 3 committed batches of a 3-partition topic
    holding 10 records per partition; offsets/2 (30 per partition) is beyond the log end (the repair
    moves it to 0)."""
    import s3fs

    topic = new_topic(3)
    produce(topic, 30)
    options = {"endpoint_url": s3_endpoint}
    fs = s3fs.S3FileSystem(**options)
    bucket = f"apply-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    url = f"s3://{bucket}/chk"
    fs.pipe({f"{url}/{rel}": data for rel, data in checkpoint_files(topic=topic, crc=False).items()})
    yield fs, url, options, topic
    fs.rm(bucket, recursive=True)


def planned(url: str, options: dict[str, str], kafka: KafkaConfig) -> tuple[Plan, Any]:
    """A plan and the handle it was read from, before any lock (as a Python caller makes them)."""
    chk = open_checkpoint(url, options)
    view, _ = checkpoint_view(chk)
    return decide_repair(view, cluster_for(kafka, resolve_sink(view))), chk


def batch(topic: str, offset: int) -> bytes:
    return f"v1\n{META}\n{kafka_json(topic, [offset] * 3)}".encode()


def untouched(fs: Any, url: str, topic: str) -> None:
    """Nothing was written: offsets/2 as built, no backup set, no intent record left."""
    assert fs.cat_file(f"{url}/offsets/2") == batch(topic, 30)
    assert not fs.exists(f"{url}/_recovery/intent.json")
    assert not fs.exists(f"{url}/_recovery/backups")


def test_an_unchanged_checkpoint_is_not_read_again(
    s3_chk: tuple[Any, str, dict[str, str], str], bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs, url, options, topic = s3_chk
    kafka = KafkaConfig(bootstrap)
    plan, chk = planned(url, options, kafka)
    assert [str(f) for f in plan.files] == ["offsets/2"]

    def no_second_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("the checkpoint was read again under the lock")

    monkeypatch.setattr(apply_module, "open_checkpoint", no_second_read)
    applied = apply(plan, kafka, storage_options=options, active_within_s=0, checkpoint=chk)
    assert applied.backup is not None
    assert fs.cat_file(f"{url}/offsets/2") == batch(topic, 0)
    backup = f"{url}/_recovery/backups/{applied.backup.id}"
    assert fs.cat_file(f"{backup}/files/offsets/2") == batch(topic, 30)
    assert json.loads(fs.cat_file(f"{backup}/manifest.json"))["absent"] == ["_recovery/topic-ids.json"]
    assert not fs.exists(f"{url}/_recovery/intent.json")


def test_a_batch_written_between_plan_and_apply_is_refused(
    s3_chk: tuple[Any, str, dict[str, str], str], bootstrap: str
) -> None:
    fs, url, options, topic = s3_chk
    kafka = KafkaConfig(bootstrap)
    plan, chk = planned(url, options, kafka)
    fs.pipe({f"{url}/offsets/3": batch(topic, 40), f"{url}/commits/3": b'v1\n{"nextBatchWatermarkMs":0}'})
    with pytest.raises(PlanOutdated, match="changed since the plan was made"):
        apply(plan, kafka, storage_options=options, active_within_s=0, checkpoint=chk)
    untouched(fs, url, topic)


def test_a_batch_file_rewritten_between_plan_and_apply_is_read_again(
    s3_chk: tuple[Any, str, dict[str, str], str], bootstrap: str
) -> None:
    """Same batch files, same size, other bytes: the LIST's ETag is not the MD5 of what the plan read,
    so the checkpoint is read again; the backup holds the bytes that were there, not the plan's."""
    fs, url, options, topic = s3_chk
    kafka = KafkaConfig(bootstrap)
    plan, chk = planned(url, options, kafka)
    fs.pipe_file(f"{url}/offsets/2", batch(topic, 31))
    applied = apply(plan, kafka, storage_options=options, active_within_s=0, checkpoint=chk)
    assert applied.backup is not None
    assert fs.cat_file(f"{url}/_recovery/backups/{applied.backup.id}/files/offsets/2") == batch(topic, 31)
    assert fs.cat_file(f"{url}/offsets/2") == batch(topic, 0)


def test_a_batch_file_whose_etag_is_no_md5_is_read_again(
    s3_chk: tuple[Any, str, dict[str, str], str], bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object uploaded in parts has an ETag that is no MD5 of its bytes ("<md5 of md5s>-1"): the
    listing cannot prove the plan's read current, so the checkpoint is read again under the lock."""
    import boto3

    fs, url, options, topic = s3_chk
    bucket, key = url.removeprefix("s3://").split("/", 1)
    client, where = boto3.client("s3", endpoint_url=options["endpoint_url"]), f"{key}/offsets/2"
    upload = client.create_multipart_upload(Bucket=bucket, Key=where)["UploadId"]
    part = client.upload_part(Bucket=bucket, Key=where, PartNumber=1, UploadId=upload, Body=batch(topic, 30))
    client.complete_multipart_upload(
        Bucket=bucket,
        Key=where,
        UploadId=upload,
        MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
    )
    assert fs.info(f"{url}/offsets/2")["ETag"].strip('"').endswith("-1")  # no MD5 of the content
    kafka = KafkaConfig(bootstrap)
    plan, chk = planned(url, options, kafka)
    reads: list[str] = []

    def counted(location: str, *args: Any) -> Any:
        reads.append(location)
        return open_checkpoint(location, *args)

    monkeypatch.setattr(apply_module, "open_checkpoint", counted)
    applied = apply(plan, kafka, storage_options=options, active_within_s=0, checkpoint=chk)
    assert reads == [url]  # read again, once
    assert applied.backup is not None
    assert fs.cat_file(f"{url}/_recovery/backups/{applied.backup.id}/files/offsets/2") == batch(topic, 30)
    assert fs.cat_file(f"{url}/offsets/2") == batch(topic, 0)


def test_a_backup_set_made_between_plan_and_apply_is_never_written_over(
    s3_chk: tuple[Any, str, dict[str, str], str], bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backup id is chosen before the lock (the lock's first record names it): a set of that
    name made meanwhile is seen under the lock, and a new id is taken."""
    fs, url, options, topic = s3_chk
    kafka = KafkaConfig(bootstrap)
    plan, chk = planned(url, options, kafka)
    taken = "20260101T000000000000Z"
    monkeypatch.setattr(apply_module, "new_backup_id", lambda root, known_empty=False: taken)
    other = {f"{url}/_recovery/backups/{taken}/manifest.json": b'{"other": true}'}
    fs.pipe(other)
    applied = apply(plan, kafka, storage_options=options, active_within_s=0, checkpoint=chk)
    assert applied.backup is not None and applied.backup.id != taken
    assert fs.cat_file(f"{url}/_recovery/backups/{taken}/manifest.json") == b'{"other": true}'
    assert fs.cat_file(f"{url}/_recovery/backups/{applied.backup.id}/files/offsets/2") == batch(topic, 30)
    assert fs.cat_file(f"{url}/offsets/2") == batch(topic, 0)


def test_a_heartbeat_written_between_plan_and_apply_refuses(
    s3_chk: tuple[Any, str, dict[str, str], str], bootstrap: str
) -> None:
    fs, url, options, topic = s3_chk
    kafka = KafkaConfig(bootstrap)
    plan, chk = planned(url, options, kafka)
    write_heartbeat(url, query_id="q", run_id="r", state="running", interval_s=10, storage_options=options)
    with pytest.raises(CheckpointInUse, match="the query is running"):
        apply(plan, kafka, storage_options=options, active_within_s=0, checkpoint=chk)
    untouched(fs, url, topic)


def test_a_mistyped_topic_writes_nothing_not_even_the_lock_record(
    s3_chk: tuple[Any, str, dict[str, str], str], bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad input is found by the plan, made before the lock: no PUT at all (the intent record the
    lock writes on object stores included), exit 2's error naming the topic."""
    from recovery.checkpoint.store import Store
    from recovery.core.model import Strategy
    from recovery.core.specs import parse_topic_partitions
    from recovery.errors import OffsetSpecError

    fs, url, options, topic = s3_chk
    writes: list[str] = []
    for name in ("write_atomic", "write", "remove"):
        original = getattr(Store, name)

        def spy(self: Store, rel: str, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            writes.append(rel)
            return _original(self, rel, *args, **kwargs)

        monkeypatch.setattr(Store, name, spy)
    strategy = Strategy(scope=parse_topic_partitions(f"{topic}x"))
    with pytest.raises(OffsetSpecError, match=f"^scope {topic}x: the checkpoint reads no such topic"):
        repair_checkpoint(url, KafkaConfig(bootstrap), strategy, execute=True, storage_options=options)
    assert writes == []
    untouched(fs, url, topic)


def test_repair_execute_refuses_a_running_query(
    s3_chk: tuple[Any, str, dict[str, str], str], bootstrap: str
) -> None:
    fs, url, options, topic = s3_chk
    kafka = KafkaConfig(bootstrap)
    write_heartbeat(url, query_id="q", run_id="r", state="running", interval_s=10, storage_options=options)
    with pytest.raises(CheckpointInUse, match="the query is running"):
        repair_checkpoint(url, kafka, execute=True, storage_options=options, active_within_s=0)
    untouched(fs, url, topic)
    result = repair_checkpoint(url, kafka, execute=True, storage_options=options, force=True)
    assert result.executed and result.backup_id
    assert fs.cat_file(f"{url}/offsets/2") == batch(topic, 0)
    # a second repair finds nothing to change: it records the topic ids, writes no backup set
    again = repair_checkpoint(url, kafka, execute=True, storage_options=options, force=True)
    assert again.executed and again.backup_id is None
    assert not fs.exists(f"{url}/_recovery/intent.json")


REPAIR = """
import sys
from recovery.api import repair_checkpoint
from recovery.kafka.config import KafkaConfig
url, endpoint, bootstrap, how = sys.argv[1:]
options = {"endpoint_url": endpoint}
kafka = KafkaConfig(bootstrap)
if how == "cli":
    repair_checkpoint(url, kafka, execute=True, storage_options=options, force=True)
else:
    from recovery.apply import apply
    from recovery.checkpoint import open_checkpoint
    from recovery.core.plan import decide_repair, resolve_sink
    from recovery.resume import checkpoint_view, cluster_for
    chk = open_checkpoint(url, options)
    view, _ = checkpoint_view(chk)
    apply(decide_repair(view, cluster_for(kafka, resolve_sink(view))), kafka, storage_options=options,
          force=True, checkpoint=chk)
"""


@pytest.mark.parametrize("how", ["cli", "api"])
def test_killed_at_every_write_then_run_again_finishes(
    s3_chk: tuple[Any, str, dict[str, str], str], bootstrap: str, tmp_path: Any, how: str
) -> None:
    """SIGKILL before each file operation of ``repair --execute`` and of ``apply(plan,
    checkpoint=chk)`` (the plan read before the lock, proven current under it; the lock's first
    record names the backup set): Spark can read the checkpoint at every kill point, and running the
    command again rolls back and finishes."""
    import os
    import subprocess
    import sys

    from recovery.checkpoint.store import FAULT_AT_ENV, FAULT_LOG_ENV

    fs, url, options, topic = s3_chk
    original = {rel: fs.cat_file(f"{url}/{rel}") for rel in ("offsets/2", "sources/0/0", "metadata")}

    def run(**env: str) -> int:
        argv = [sys.executable, "-c", REPAIR, url, options["endpoint_url"], bootstrap, how]
        return subprocess.run(argv, env={**os.environ, **env}, timeout=120).returncode

    def reset() -> None:
        if fs.exists(f"{url}/_recovery"):
            fs.rm(f"{url}/_recovery", recursive=True)
        fs.pipe({f"{url}/{rel}": data for rel, data in original.items()})
        fs.invalidate_cache()

    log = tmp_path / "ops.log"
    assert run(**{FAULT_LOG_ENV: str(log)}) == 0
    operations = len(log.read_text().splitlines())
    assert operations >= 6  # intent, backup file, manifest, intent, offsets/2, topic ids, ...
    done = fs.cat_file(f"{url}/offsets/2")
    assert done == batch(topic, 0)
    for at in range(1, operations + 1):
        reset()
        assert run(**{FAULT_AT_ENV: str(at)}) == -9, at
        fs.invalidate_cache()
        open_checkpoint(url, options).verify()  # readable at the kill point
        assert fs.cat_file(f"{url}/offsets/2") in (original["offsets/2"], done), at
        assert run() == 0, at
        fs.invalidate_cache()
        assert fs.cat_file(f"{url}/offsets/2") == done, at
        assert not fs.exists(f"{url}/_recovery/intent.json"), at
