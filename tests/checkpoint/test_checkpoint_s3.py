"""The S3 paths against a real S3 API server (moto in server mode, started by the ``s3_endpoint`` fixture)."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from chk_builder import checkpoint_files
from click.testing import CliRunner

import recovery.checkpoint.intent as intent_module
from recovery.checkpoint import (
    CrcStatus,
    NextRun,
    checkpoint_lock,
    list_backups,
    open_checkpoint,
    restore_backup,
    rewrite_offsets,
)
from recovery.checkpoint.intent import (
    Intent,
    Phase,
    _intent_json,
    current_holder,
    read_intent,
)
from recovery.checkpoint.recovery_dir import INTENT_FILE
from recovery.checkpoint.store import Store
from recovery.cli import cli
from recovery.core.model import TopicPartition
from recovery.errors import CheckpointFormatError, StateError, StorageError

ORDERS_1 = TopicPartition("orders", 1)


@pytest.fixture
def s3(s3_endpoint: str) -> Iterator[tuple[Any, str, dict[str, str]]]:
    """(s3fs filesystem, s3://bucket/chk URL, storage options) with a checkpoint as Spark would leave
    it on S3: no .crc side files."""
    import s3fs

    options = {"endpoint_url": s3_endpoint}
    fs = s3fs.S3FileSystem(**options)
    bucket = f"chk-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    url = f"s3://{bucket}/jobs/orders/chk"
    for rel, data in checkpoint_files(crc=False).items():
        fs.pipe_file(f"{url}/{rel}", data)
    yield fs, url, options
    fs.rm(bucket, recursive=True)


def test_read_an_s3_checkpoint(s3: tuple[Any, str, dict[str, str]]) -> None:
    _, url, options = s3
    chk = open_checkpoint(url, options)
    assert chk.offset_batch_ids == (0, 1, 2) and chk.commit_batch_ids == (0, 1, 2)
    assert chk.restart_state().next_run is NextRun.NEXT_BATCH
    latest = chk.latest_offsets()
    kafka = latest.source(0).kafka if latest is not None else None
    assert kafka is not None and kafka.offsets[ORDERS_1] == 30
    initial = chk.initial_offsets(0)
    assert initial is not None and initial.kafka.offsets[ORDERS_1] == 0
    assert {f.crc for f in chk.files_read} == {CrcStatus.NOT_KEPT}


def test_rewrite_backup_and_restore_on_s3(s3: tuple[Any, str, dict[str, str]]) -> None:
    fs, url, options = s3
    original = checkpoint_files(crc=False)
    backup = rewrite_offsets(
        open_checkpoint(url, options), {2: {0: {ORDERS_1: 25}}}, initial={0: {ORDERS_1: 3}}, force=True
    )
    assert fs.cat_file(f"{url}/offsets/2") == original["offsets/2"].replace(b'"1":30', b'"1":25')
    assert fs.cat_file(f"{url}/sources/0/0") == b'\x00v1\n{"orders":{"0":0,"1":3,"2":0}}'
    assert not fs.exists(f"{url}/offsets/.2.crc")  # S3 keeps no side files
    assert not [p for p in fs.find(url) if p.endswith(".tmp")]  # one PUT per object, no temp objects
    manifest = json.loads(fs.cat_file(f"{url}/_recovery/backups/{backup.id}/manifest.json"))
    assert {f["path"] for f in manifest["files"]} == {"offsets/2", "sources/0/0"}
    assert manifest["absent"] == []  # side files are never recorded (nor created or deleted) on S3
    assert not fs.exists(f"{url}/_recovery/intent.json")  # the intent record is gone once done
    assert list_backups(url, options) == (backup,)

    result = restore_backup(url, execute=True, storage_options=options, force=True)
    assert set(result.written) == {"offsets/2", "sources/0/0"}
    for rel in ("offsets/2", "sources/0/0"):
        assert fs.cat_file(f"{url}/{rel}") == original[rel]


def test_bad_file_on_s3_is_named_with_its_url(s3: tuple[Any, str, dict[str, str]]) -> None:
    fs, url, options = s3
    fs.pipe_file(f"{url}/offsets/2", b"v9\n{}\n1")
    with pytest.raises(CheckpointFormatError) as raised:
        open_checkpoint(url, options).latest_offsets()
    assert str(raised.value) == f"{url}/offsets/2: unsupported log version v9 (this tool reads up to v2)"


def test_cli_show_on_s3(s3: tuple[Any, str, dict[str, str]], s3_endpoint: str) -> None:
    _, url, _ = s3
    result = CliRunner().invoke(
        cli,
        ["checkpoint", "show", url, "--storage-option", f"endpoint_url={s3_endpoint}", "--output", "json"],
    )
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["checkpoint"] == url
    assert info["next_run"] == {"action": "next_batch", "batch_id": 3, "start": "offsets/2", "end": None}


def test_unreachable_store_is_a_storage_error(s3_endpoint: str) -> None:
    from recovery.local.broker import free_port

    options = {
        "endpoint_url": f"http://127.0.0.1:{free_port()}",
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
    }
    with pytest.raises(StorageError) as raised:
        open_checkpoint("s3://nowhere/chk", options)
    # The first request is the GET of metadata (no root listing on object stores).
    message = str(raised.value)
    assert message.startswith("s3://nowhere/chk/metadata: EndpointConnectionError: Could not connect")
    assert raised.value.exit_code == 3


# -- the lock on S3: its record is created with a conditional PUT ---------------------------------


def _foreign_record(store: Store, *, alive: bool) -> bytes:
    """Write another writer's intent record (phase backup: no file changed yet): this process's
    holder (alive), or one whose process is gone (dead: a pid that has exited, a start time no
    process has)."""
    holder = current_holder("repair --execute")
    if not alive:
        gone = subprocess.Popen(["true"])
        gone.wait()
        holder = replace(holder, pid=gone.pid, proc_start="1")  # "1": not even a reused pid's
    data = _intent_json(Intent("theirs", holder, Phase.BACKUP)).encode()
    store.write_atomic(INTENT_FILE, data)
    return data


def test_create_writes_only_when_nothing_has_the_name(
    s3: tuple[Any, str, dict[str, str]], tmp_path: Path
) -> None:
    fs, url, options = s3
    store = Store(url, options)
    assert store.create("_recovery/x.json", b"one") is True
    assert store.create("_recovery/x.json", b"two") is False
    assert fs.cat_file(f"{url}/_recovery/x.json") == b"one"
    # No conditional write on a local file system (its lock is a flock): nothing written.
    assert Store(str(tmp_path)).create("x", b"one") is None and not (tmp_path / "x").exists()


def test_a_record_written_since_the_callers_listing_is_read_not_overwritten(
    s3: tuple[Any, str, dict[str, str]],
) -> None:
    """``none_listed``: the caller saw no record; one written since is a live writer's (refused, its
    record left as it is) or a dead one's (rolled back first, as always)."""
    _, url, options = s3
    store = Store(url, options)
    theirs = _foreign_record(store, alive=True)
    with (
        pytest.raises(StateError, match="is writing this checkpoint"),
        checkpoint_lock(url, options, command="test", none_listed=True),
    ):
        pass
    assert store.read(INTENT_FILE) == theirs

    _foreign_record(store, alive=False)
    with checkpoint_lock(url, options, command="test", none_listed=True) as lock:
        assert lock.recovered is not None and lock.recovered.intent.token == "theirs"
        assert read_intent(store).token == lock.token  # type: ignore[union-attr]
    assert store.read(INTENT_FILE) is None


def test_a_record_written_between_the_read_and_the_write_refuses(
    s3: tuple[Any, str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual way (the record read first, none there): a writer that starts between that read and
    our write keeps the lock, because our record is only created if there is none."""
    _, url, options = s3
    store = Store(url, options)
    read_then_race = intent_module._take_over_leftover

    def racing(*args: Any, **kwargs: Any) -> Any:
        found = read_then_race(*args, **kwargs)
        racing.theirs = _foreign_record(store, alive=True)  # type: ignore[attr-defined]
        return found

    monkeypatch.setattr(intent_module, "_take_over_leftover", racing)
    with (
        pytest.raises(StateError, match="is writing this checkpoint"),
        checkpoint_lock(url, options, command="test"),
    ):
        pass
    assert store.read(INTENT_FILE) == racing.theirs  # type: ignore[attr-defined]
