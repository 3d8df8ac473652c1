"""The local rig for ``conf/examples``: a real Kafka broker and a real S3 API server (moto), with the
topics and Spark checkpoints the example jobs describe.

    .venv/bin/python conf/examples/rig.py
        start, set up, print the environment to use, wait for Ctrl-C or end of input (kcat -M style)
    .venv/bin/python conf/examples/rig.py stream-recovery fleet validate conf/examples
        start, set up, run the command with that environment, stop; exits with the command's code

What it sets up (topics on a fresh broker, checkpoints rewritten on every start):

* ``orders`` (3 partitions, 40 records each): ``orders-to-delta`` read 30 of each: healthy;
* ``payments`` (3 x 40): ``payments-audit`` read 15 of each, then DeleteRecords moved the log start
  of partitions 0 and 1 to 25: 10 records lost in each;
* ``clicks`` (2 x 50): ``clicks-sessionize`` read everything; its checkpoint is on S3;
* ``inventory-replica`` reads cluster ``dr``, which does not answer.

The checkpoints are written byte for byte as Spark 4.2 writes them for a Kafka query
(``tests/checkpoint/chk_builder.py`` has the same observed format): ``offsets/N`` is ``v1``, the
batch metadata and the Kafka offsets JSON; ``commits/N``; ``sources/0/0``; ``.crc`` files beside
each on a local disk, none on S3.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

LOCAL_ROOT = Path("/tmp/stream-recovery-examples")
BUCKET = "fleet-examples"


def meta() -> str:
    """A batch's metadata line. ``batchTimestampMs`` is when the batch was planned: after every record
    below its offsets was written (the checkpoints here are written after their records are produced),
    as in a checkpoint Spark writes; ``validate`` compares record times with it."""
    now_ms = int(time.time() * 1000)
    return (
        f'{{"batchWatermarkMs":0,"batchTimestampMs":{now_ms},'
        '"conf":{"spark.sql.shuffle.partitions":"2","spark.sql.streaming.multipleWatermarkPolicy":"min"}}'
    )


def kafka_json(topic: str, offsets: Sequence[int]) -> str:
    """``{"orders":{"0":30,"1":30}}``, as Spark's KafkaSourceOffset writes it."""
    return "{" + f'"{topic}":{{' + ",".join(f'"{p}":{o}' for p, o in enumerate(offsets)) + "}}"


def checkpoint_files(
    topic: str,
    batches: Sequence[Sequence[int]],
    *,
    committed: int | None = None,
    query_id: str | None = None,
    crc: bool = True,
) -> dict[str, bytes]:
    """Relative path -> bytes of a Kafka query's checkpoint: batch ``b`` ends at ``batches[b]`` (one
    offset per partition); the first ``committed`` batches (default: all) are committed."""
    from recovery.checkpoint.crc import checksum_file, crc_name

    done = len(batches) if committed is None else committed
    files = {"metadata": f'{{"id":"{query_id or uuid.uuid4()}"}}'.encode()}
    for b, ends in enumerate(batches):
        files[f"offsets/{b}"] = f"v1\n{meta()}\n{kafka_json(topic, ends)}".encode()
    for b in range(done):
        files[f"commits/{b}"] = b'v1\n{"nextBatchWatermarkMs":0}'
    files["sources/0/0"] = b"\x00v1\n" + kafka_json(topic, [0] * len(batches[0])).encode()
    if crc:
        for rel, data in list(files.items()):
            parent, _, name = rel.rpartition("/")
            files[f"{parent}/{crc_name(name)}" if parent else crc_name(name)] = checksum_file(data)
    return files


def write_local(root: Path, files: Mapping[str, bytes]) -> None:
    """Replace whatever is at ``root`` with ``files``."""
    shutil.rmtree(root, ignore_errors=True)
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def write_s3(fs: Any, url: str, files: Mapping[str, bytes]) -> None:
    """Replace whatever is under ``url`` with ``files`` (an s3fs filesystem)."""
    if fs.exists(url):
        fs.rm(url, recursive=True)
    for rel, data in files.items():
        fs.pipe_file(f"{url}/{rel}", data)


def s3_environment(endpoint: str) -> dict[str, str]:
    """What the example jobs read from the environment to reach the S3 API server."""
    return {
        "FLEET_S3_ENDPOINT": endpoint,
        "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
    }


def prepare(bootstrap: str, s3_endpoint: str, *, local_root: Path = LOCAL_ROOT, suffix: str = "") -> None:
    """Create the example topics (named with ``suffix``) and write the example checkpoints."""
    import s3fs

    from recovery.local import topics

    orders, payments, clicks = (f"{name}{suffix}" for name in ("orders", "payments", "clicks"))
    for topic, partitions, per_partition in ((orders, 3, 40), (payments, 3, 40), (clicks, 2, 50)):
        topics.create_topic(bootstrap, topic, partitions)
        topics.produce(
            bootstrap, topic, topics.keyed_records(partitions * per_partition, partitions=partitions)
        )
    topics.delete_records(bootstrap, payments, {0: 25, 1: 25})

    write_local(local_root / "orders-to-delta", checkpoint_files(orders, [[20] * 3, [30] * 3]))
    write_local(local_root / "payments-audit", checkpoint_files(payments, [[10] * 3, [15] * 3]))
    write_local(local_root / "inventory-replica", checkpoint_files("inventory", [[5] * 2]))
    env = s3_environment(s3_endpoint)
    fs = s3fs.S3FileSystem(
        endpoint_url=s3_endpoint, key=env["AWS_ACCESS_KEY_ID"], secret=env["AWS_SECRET_ACCESS_KEY"]
    )
    if not fs.exists(BUCKET):
        fs.mkdir(BUCKET)
    write_s3(fs, f"s3://{BUCKET}/clicks-sessionize", checkpoint_files(clicks, [[50] * 2], crc=False))


def main(argv: list[str]) -> int:
    from moto.server import ThreadedMotoServer

    from recovery.local.broker import LocalKafkaBroker, free_port

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    port = free_port()
    s3_server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    s3_server.start()
    try:
        with LocalKafkaBroker() as broker:
            endpoint = f"http://127.0.0.1:{port}"
            env = {"KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers, **s3_environment(endpoint)}
            os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
            prepare(broker.bootstrap_servers, endpoint)
            if argv:
                # `stream-recovery ...` runs this checkout's CLI, whether or not it is on PATH.
                command = (
                    [sys.executable, "-m", "recovery", *argv[1:]] if argv[0] == "stream-recovery" else argv
                )
                return subprocess.run(command, env={**os.environ, **env}, check=False).returncode
            for key, value in env.items():
                print(f"export {key}={value}")
            print(
                "% the rig is up: run the commands above in another shell; Ctrl-C or EOF stops it",
                file=sys.stderr,
            )
            with contextlib.suppress(KeyboardInterrupt):
                sys.stdin.read()
            return 0
    finally:
        s3_server.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's recovery package
    sys.exit(main(sys.argv[1:]))
