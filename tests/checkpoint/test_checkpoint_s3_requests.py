"""How many requests ``checkpoint show``, ``validate`` and ``repair --execute`` send to object storage,
counted by the S3 API server itself (the request log of the ``s3_endpoint`` fixture's server, one
line per request it answered), on a checkpoint with 1,000 retained batches.

Budgets (issue 11): show and validate <= 3 LIST and <= 6 GET/HEAD whatever the number of retained
batches up to 1,000; repair --execute <= 15 requests plus one PUT per changed file and per backup
file (a DELETE counts too): 15 here, see the test. Needs the broker (validate, repair): run through
the rig semaphore."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from chk_builder import checkpoint_files

from recovery.checkpoint.recovery_dir import INTENT_FILE
from recovery.cli import main
from recovery.topic_ids import TOPIC_IDS_FILE

BATCHES = 1000
# werkzeug's request log line: "GET /bucket/key?query HTTP/1.1" 200 -  (maybe inside colour codes,
# two of them for a DELETE's 204)
_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)*(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP/')


class RequestLog(logging.Handler):
    """The server's request log (werkzeug logs one line per request it answered), kept per bucket."""

    def __init__(self, bucket: str) -> None:
        super().__init__(logging.INFO)
        self.bucket = bucket
        self.requests: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = _REQUEST.search(record.getMessage())
        if found and found.group(2).lstrip("/").split("/")[0].split("?")[0] == self.bucket:
            method, target = found.groups()
            kind = "LIST" if method == "GET" and "list-type=" in target else method
            self.requests.append((kind, target))

    def take(self) -> Counter[str]:
        counts = Counter(kind for kind, _ in self.requests)
        self.requests.clear()
        return counts


@pytest.fixture
def s3_big(
    s3_endpoint: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> Iterator[tuple[str, str, RequestLog]]:
    """(checkpoint URL, --storage-option value, request log): 1,000 retained and committed batches of
    a real 3-partition topic holding 10 records per partition; the latest batch (offset 10,000) is
    beyond the log end, so repair has one file to change."""
    import s3fs
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    topic = new_topic(3)
    produce(topic, 30)
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint)
    bucket = f"count-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    url = f"s3://{bucket}/chk"
    files = checkpoint_files(batches=BATCHES, committed=BATCHES, topic=topic, crc=False)
    # Stored straight into the server's own store (it runs in this process): 2,000 PUTs over HTTP
    # took 23 s, and the files are the same to whoever reads them.
    store = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    for rel, data in files.items():
        store.put_object(bucket, f"chk/{rel}", data)
    log = RequestLog(bucket)
    server_log = logging.getLogger("werkzeug")
    level = server_log.level
    server_log.setLevel(logging.INFO)
    server_log.addHandler(log)
    try:
        yield url, f"endpoint_url={s3_endpoint}", log
    finally:
        server_log.removeHandler(log)
        server_log.setLevel(level)
        fs.rm(bucket, recursive=True)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_show_and_validate_list_three_times_and_read_each_file_once(
    s3_big: tuple[str, str, RequestLog], bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url, option, log = s3_big
    log.take()
    code, out, _ = run(capsys, "checkpoint", "show", url, "--storage-option", option, "--output", "json")
    show = log.take()
    assert code == 0 and json.loads(out)["offsets"]["latest"] == BATCHES - 1
    assert show["LIST"] <= 3 and show["GET"] + show["HEAD"] <= 6, show
    assert set(show) <= {"LIST", "GET", "HEAD"}  # never a write

    code, out, _ = run(
        capsys, "validate", url, "-b", bootstrap, "--storage-option", option, "--output", "json"
    )
    validate = log.take()
    assert code == 1  # the latest batch is beyond the log end: action needed
    assert validate["LIST"] <= 3 and validate["GET"] + validate["HEAD"] <= 6, validate
    assert set(validate) <= {"LIST", "GET", "HEAD"}


def test_repair_execute_writes_each_changed_file_once(
    s3_big: tuple[str, str, RequestLog], bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One PUT per changed file and per backup file, nothing else written to the checkpoint's own
    files, and 15 other requests (issue 11's budget). The changed files are ``offsets/999`` and the
    topic-id record: the intent record names both and the backup set keeps both (the record's
    absence, here), so a restore puts both back.

    The 15: the plan reads the checkpoint before any lock, so a refused plan or a mistyped --topic
    writes nothing (GET metadata, LIST offsets/ commits/ _recovery/, GET offsets/998 and 999,
    commits/999, sources/0/0); the lock (the intent record's conditional PUT, naming the backup
    set: the plan's listing showed none, so it is not read first; one LIST of _recovery/ that
    proves the record ours); the plan's reads proven current under it (one LIST of offsets/ and of
    commits/, ETags = MD5 of the bytes read); the intent record's second phase, last-write.json
    and the DELETE of the intent record."""
    url, option, log = s3_big
    log.take()
    argv = ("repair", url, "-b", bootstrap, "--storage-option", option, "--active-within", "0")
    code, out, err = run(capsys, *argv, "--execute", "--output", "json")
    requests = list(log.requests)
    counts = log.take()
    assert code == 0, err
    body: dict[str, Any] = json.loads(out)
    assert body["executed"] and body["backup_id"], body
    puts = [target for kind, target in requests if kind == "PUT"]
    prefix = f"/{url.removeprefix('s3://')}"
    assert [p for p in puts if "/_recovery/" not in p] == [f"{prefix}/offsets/{BATCHES - 1}"]
    changed = [p for p in puts if p in (f"{prefix}/offsets/{BATCHES - 1}", f"{prefix}/{TOPIC_IDS_FILE}")]
    assert len(changed) == 2, puts
    assert [r for r in requests if r[0] == "GET" and r[1].endswith(INTENT_FILE)] == []  # not read first
    backup = sorted(
        p.removeprefix(f"{prefix}/_recovery/backups/{body['backup_id']}/") for p in puts if "/backups/" in p
    )
    assert backup == [f"files/offsets/{BATCHES - 1}", "manifest.json"]
    assert not [r for r in requests if r[0] == "POST"]  # no copies, no multi-part uploads
    others = sum(counts.values()) - len(changed) - len(backup)
    print(f"repair --execute on S3: {dict(counts)}; besides the changed and backup files: {others}")
    assert others <= 15, (dict(counts), requests)
