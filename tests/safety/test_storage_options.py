"""Storage options are typed and checked before any IO, no secret is ever printed, and no ``.crc``
side file is created, deleted or recorded on a store that keeps none."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest
from chk_builder import checkpoint_files

from recovery.checkpoint import checkpoint_lock, open_checkpoint, rewrite_offsets
from recovery.checkpoint.recovery_dir import INTENT_FILE
from recovery.checkpoint.store import FAULT_LOG_ENV, Store
from recovery.cli import main
from recovery.core.model import TopicPartition
from recovery.errors import ConfigError, ExitCode, InvalidInput


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_booleans_and_numbers_reach_s3fs_typed() -> None:
    store = Store("s3://bucket/chk", {"anon": "false", "use_ssl": "False", "max_concurrency": "4"})
    assert store.storage_options == {"anon": False, "use_ssl": False, "max_concurrency": 4}
    assert store.fs.anon is False
    store = Store("s3://bucket/chk", {"anon": "true", "client_kwargs": '{"region_name":"eu-west-1"}'})
    assert store.storage_options == {"anon": True, "client_kwargs": {"region_name": "eu-west-1"}}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bogus": "1"}, "unknown storage option 'bogus' for S3FileSystem"),
        ({"anonn": "false"}, "unknown storage option 'anonn' for S3FileSystem; did you mean anon"),
        ({"anon": "maybe"}, "storage option anon: expected true or false, got 'maybe'"),
        ({"max_concurrency": "many"}, "storage option max_concurrency: expected an integer, got 'many'"),
        ({"client_kwargs": "x"}, "storage option client_kwargs: expected a JSON object"),
        ({"endpoint_url": "not-a-url"}, "storage option endpoint_url: expected an http:// or https:// URL"),
        ({"endpoint_url": "http://h:99999"}, "storage option endpoint_url: bad port"),
    ],
)
def test_bad_storage_options_are_bad_input_before_any_io(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Store("s3://bucket/chk", options)
    assert str(raised.value).startswith(message) and raised.value.exit_code is ExitCode.INVALID_INPUT


def test_cli_bad_storage_option_exits_2_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "checkpoint", "show", "s3://bucket/chk", "--storage-option", "bogus=1")
    assert (
        (code, out) == (2, "")
        and err.startswith("Error: unknown storage option 'bogus'")
        and err.count("\n") == 1
    )


def test_no_secret_is_printed_when_the_store_fails(capsys: pytest.CaptureFixture[str]) -> None:
    secrets = ("AKIAUSERNAME", "s3cr3tInUrl", "AKIAKEYID12345", "topSecretValue99", "sessionTok3n")
    code, out, err = run(
        capsys,
        "checkpoint",
        "show",
        "s3://bucket/chk",
        "--storage-option",
        f"endpoint_url=http://{secrets[0]}:{secrets[1]}@127.0.0.1:{free_port()}",
        "--storage-option",
        f"key={secrets[2]}",
        "--storage-option",
        f"secret={secrets[3]}",
        "--storage-option",
        f"token={secrets[4]}",
        "--storage-option",
        'config_kwargs={"retries":{"max_attempts":1},"connect_timeout":1}',
    )
    assert code == 3 and err.count("\n") == 1, err
    for secret in secrets:
        assert secret not in out + err


def test_a_bad_endpoint_with_credentials_is_not_echoed(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "checkpoint", "show", "s3://b/chk", "--storage-option", "endpoint_url=ftp://u:hunter22@h"
    )
    assert code == 2 and "hunter22" not in err and "ftp://***@h" in err


def test_object_stores_never_touch_side_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """memory:// keeps no .crc (as S3, GCS, ABFS): a rewrite neither writes, deletes nor records one."""
    url = f"memory://chk-{os.getpid()}-{tmp_path.name}"
    store = Store(url)
    for rel, data in checkpoint_files(crc=False).items():
        store.write(rel, data)
    log = tmp_path / "ops.log"
    monkeypatch.setenv(FAULT_LOG_ENV, str(log))
    backup = rewrite_offsets(open_checkpoint(url), {2: {0: {TopicPartition("orders", 0): 5}}}, force=True)
    ops = log.read_text()
    assert ".crc" not in ops and "offsets/2" in ops
    assert backup.absent == () and [f.path for f in backup.files] == ["offsets/2"]
    assert not [e for e in store.list("offsets") if e.name.endswith(".crc")]


def test_credentials_in_the_checkpoint_url_are_masked_in_sdk_messages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """botocore quotes the bucket of ``s3://KEY:SECRET@bucket/chk`` as ``"KEY:SECRET@bucket"`` in its
    own message; neither part reaches the output."""
    code, out, err = run(
        capsys,
        "checkpoint",
        "show",
        "s3://AKIAINURL42:s3cr3tInBucket@bucket/chk",
        "--storage-option",
        f"endpoint_url=http://127.0.0.1:{free_port()}",
        "--storage-option",
        'config_kwargs={"retries":{"max_attempts":1},"connect_timeout":1}',
    )
    assert code in (ExitCode.INVALID_INPUT, ExitCode.UNREACHABLE) and out == "" and err.count("\n") == 1, err
    assert "s3://***@bucket/chk" in err
    assert "s3cr3tInBucket" not in err and "AKIAINURL42" not in err


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("s3://AKIA:pw@bucket/chk: gone", "s3://***@bucket/chk: gone"),
        ('Invalid bucket name "AKIA:pw@bucket"', 'Invalid bucket name "***@bucket"'),
        ("SASL_SSL://svc:pa55@broker:9093 refused", "SASL_SSL://***@broker:9093 refused"),
        ("http://u:p@h:1/x and 'u:p@h'", "http://***@h:1/x and '***@h'"),
        ("ops@example.com owns /data/chk", "ops@example.com owns /data/chk"),
    ],
)
def test_every_recovery_error_masks_url_credentials(text: str, masked: str) -> None:
    """The last line of defence: whatever a library (deltalake, botocore, librdkafka) put in a
    message, a RecoveryError built from it shows no user:password@."""
    from recovery.errors import DeltaError, KafkaError, StorageError

    for error in (StorageError, DeltaError, KafkaError, ConfigError):
        assert str(error(text)) == masked


def test_error_messages_are_one_line() -> None:
    """deltalake and delta-rs put arrows and newlines in their texts; the CLI prints one line."""
    from recovery.errors import DeltaError, RigError

    text = "s3://b/t: OSError: Generic S3 error\n  ↳ error sending request\n   ↳ Connection refused\n"
    assert (
        str(DeltaError(text))
        == "s3://b/t: OSError: Generic S3 error ↳ error sending request ↳ Connection refused"
    )
    assert str(RigError("broker exited:\nlog line")) == "broker exited:\nlog line"  # a log tail stays a tail


@pytest.mark.parametrize(
    "location",
    ["/tmp/chk", "/tmp/chk/", "chk", "./chk", ".", "~/chk", "a/../b", "/", "//net/chk", "/a:b/c", "x y/"],
)
def test_a_plain_local_path_is_the_directory_fsspec_would_use(location: str) -> None:
    """A plain local path is resolved without fsspec (its import is most of a local command's
    start), to the very root fsspec's local file system makes of it."""
    import fsspec

    store = Store(location)
    _, root = fsspec.core.url_to_fs(store.location)
    assert (store.root, store.protocol, store.is_local, store.has_rename, store.keeps_crc) == (
        str(root).rstrip("/") or str(root),
        "file",
        True,
        True,
        True,
    )
    assert store.fs.protocol == fsspec.filesystem("file").protocol  # made when asked for


def test_the_last_write_time_of_a_local_file_follows_a_symlink_as_fsspec_does(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.write_text("v1")
    os.utime(outside, (1_700_000_000, 1_700_000_000))
    (tmp_path / "chk" / "offsets").mkdir(parents=True)
    (tmp_path / "chk" / "offsets" / "1").symlink_to(outside)
    store = Store(str(tmp_path / "chk"))
    assert store.modified_ms("offsets/1") == 1_700_000_000_000
    assert store.modified_ms("offsets/2") is None


# -- writing where the path does not exist -------------------------------------------------------------


@pytest.mark.parametrize("method", ["create", "write", "write_atomic"])
def test_writing_to_a_bucket_that_does_not_exist_is_bad_input(s3_endpoint: str, method: str) -> None:
    """One rule with a local directory that cannot be made: the location as given is unusable and
    retrying does not help (exit 2, one line naming the object), never a FileNotFoundError. ``create``
    is the intent record's conditional PUT."""
    bucket = f"no-such-bucket-{uuid.uuid4().hex[:12]}"
    store = Store(f"s3://{bucket}/chk", {"endpoint_url": s3_endpoint})
    with pytest.raises(InvalidInput) as raised:
        getattr(store, method)(INTENT_FILE, b"{}")
    assert str(raised.value) == f"s3://{bucket}/chk/{INTENT_FILE}: The specified bucket does not exist"
    assert raised.value.exit_code is ExitCode.INVALID_INPUT


def test_the_lock_of_a_checkpoint_whose_bucket_is_gone_is_bad_input(s3_endpoint: str) -> None:
    """``repair --execute`` on S3, its listing of ``_recovery/`` moments ago empty (``none_listed``),
    creates its intent record with :meth:`Store.create`: the bucket deleted since is one line, exit 2.
    Only such a race reaches ``create`` from the CLI: a bucket missing from the start fails the read
    before it."""
    bucket = f"no-such-bucket-{uuid.uuid4().hex[:12]}"
    options = {"endpoint_url": s3_endpoint}
    lock = checkpoint_lock(f"s3://{bucket}/chk", options, command="repair --execute", none_listed=True)
    with pytest.raises(InvalidInput) as raised, lock:
        raise AssertionError("the lock was taken on a bucket that does not exist")
    assert str(raised.value) == f"s3://{bucket}/chk/{INTENT_FILE}: The specified bucket does not exist"
