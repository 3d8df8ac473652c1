"""Hadoop ``ChecksumFs`` side files (``.<name>.crc``), byte for byte as Spark's local file system writes them.

Pure: bytes in, bytes out. Layout (spec §7.2, ``org.apache.hadoop.fs.ChecksumFs``)::

    'c' 'r' 'c' 0x00                 magic (ChecksumFs.CHECKSUM_VERSION)
    int32 big-endian                 bytesPerChecksum (file.bytes-per-checksum, 512 by default)
    uint32 big-endian per chunk      CRC-32 (java.util.zip.CRC32 = zlib.crc32) of each chunk of the data file

An empty data file has the 8-byte header only.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

MAGIC = b"crc\x00"
DEFAULT_BYTES_PER_CHECKSUM = 512


@dataclass(frozen=True)
class Checksums:
    """A parsed ``.crc`` file: the chunk size and one CRC-32 per chunk."""

    bytes_per_checksum: int
    sums: tuple[int, ...]


def crc_name(name: str) -> str:
    """The hidden side-file name Hadoop uses for ``name``: ``0`` -> ``.0.crc``."""
    return f".{name}.crc"


def checksum_file(data: bytes, bytes_per_checksum: int = DEFAULT_BYTES_PER_CHECKSUM) -> bytes:
    """The ``.crc`` bytes Hadoop's ChecksumFs writes for a file holding ``data``."""
    if bytes_per_checksum <= 0:
        raise ValueError(f"bytes_per_checksum must be positive, got {bytes_per_checksum}")
    chunks = (data[i : i + bytes_per_checksum] for i in range(0, len(data), bytes_per_checksum))
    return (
        MAGIC
        + struct.pack(">i", bytes_per_checksum)
        + b"".join(struct.pack(">I", zlib.crc32(c)) for c in chunks)
    )


def parse_checksum_file(crc: bytes) -> Checksums | None:
    """Parse a ``.crc`` file; ``None`` if it is not one (bad magic, bad length, bad chunk size)."""
    if len(crc) < 8 or crc[:4] != MAGIC or (len(crc) - 8) % 4:
        return None
    (bpc,) = struct.unpack(">i", crc[4:8])
    if bpc <= 0:
        return None
    sums = struct.unpack(f">{(len(crc) - 8) // 4}I", crc[8:])
    return Checksums(bpc, tuple(sums))


def checksum_matches(data: bytes, crc: bytes) -> bool:
    """True when ``crc`` is a valid side file for ``data`` (with the chunk size it declares)."""
    parsed = parse_checksum_file(crc)
    return parsed is not None and checksum_file(data, parsed.bytes_per_checksum) == crc
