"""Build checkpoints byte for byte as Spark 4.2 writes them for a Kafka query (observed on the rig):
``offsets/N`` = ``v1`` + metadata + Kafka JSON (no trailing newline), ``commits/N`` = ``v1`` +
``{"nextBatchWatermarkMs":0}``, ``sources/0/0`` = NUL + ``v1`` + JSON, and a ``.N.crc`` beside each."""

from __future__ import annotations

from pathlib import Path

from recovery.checkpoint.crc import checksum_file, crc_name

QUERY_ID = "6f1c2a4e-0d55-4b8e-9a51-3f3b9d3c1e27"
META = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1795327212050,'
    '"conf":{"spark.sql.shuffle.partitions":"2","spark.sql.streaming.multipleWatermarkPolicy":"min"}}'
)


def kafka_json(topic: str, offsets: list[int]) -> str:
    return "{" + f'"{topic}":{{' + ",".join(f'"{p}":{o}' for p, o in enumerate(offsets)) + "}}"


def checkpoint_files(
    *,
    batches: int = 3,
    committed: int = 3,
    first: int = 0,
    topic: str = "orders",
    partitions: int = 3,
    crc: bool = True,
) -> dict[str, bytes]:
    """Relative path -> bytes for batches ``first``.. (``committed`` of them committed); batch b
    holds offset 10 * (b + 1) for every partition."""
    files: dict[str, bytes] = {"metadata": f'{{"id":"{QUERY_ID}"}}'.encode()}
    for b in range(first, first + batches):
        files[f"offsets/{b}"] = f"v1\n{META}\n{kafka_json(topic, [10 * (b + 1)] * partitions)}".encode()
    for b in range(first, first + committed):
        files[f"commits/{b}"] = b'v1\n{"nextBatchWatermarkMs":0}'
    files["sources/0/0"] = b"\x00v1\n" + kafka_json(topic, [0] * partitions).encode()
    if crc:
        for rel, data in list(files.items()):
            parent, _, name = rel.rpartition("/")
            files[f"{parent}/{crc_name(name)}" if parent else crc_name(name)] = checksum_file(data)
    return files


def write_checkpoint(root: Path, files: dict[str, bytes] | None = None, **kwargs: object) -> Path:
    for rel, data in (files if files is not None else checkpoint_files(**kwargs)).items():  # type: ignore[arg-type]
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), to prove what was or was not written."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
