"""Replacing checkpoint files with their Hadoop ``.crc`` side files, so that Spark can read every file
at every step.

Hadoop's ChecksumFileSystem/ChecksumFs accept a data file without a side file
(``FileNotFoundException`` on the ``.crc`` is "quietly ignored") but fail on a wrong one. So a data
file and its side file are replaced as: remove the stale side file, replace the data file (temp file
+ rename), write the new side file. Side files exist only on the local file system; on object
stores none is created or removed. Used to rewrite offsets, to restore a backup set and to roll back
an interrupted command.
"""

from __future__ import annotations

from collections.abc import Mapping

from recovery.checkpoint.crc import (
    DEFAULT_BYTES_PER_CHECKSUM,
    checksum_file,
    checksum_matches,
    crc_name,
    parse_checksum_file,
)
from recovery.checkpoint.store import Store


def crc_rel(rel: str) -> str:
    """The side file's path of the checkpoint file ``rel``: ``offsets/5`` -> ``offsets/.5.crc``."""
    parent, _, name = rel.rpartition("/")
    return f"{parent}/{crc_name(name)}" if parent else crc_name(name)


def side_file(store: Store, rel: str, data: bytes) -> bytes | None:
    """The new side file for ``rel`` holding ``data`` (local file system only)."""
    old = store.read(crc_rel(rel))
    parsed = parse_checksum_file(old) if old is not None else None
    return checksum_file(data, parsed.bytes_per_checksum if parsed else DEFAULT_BYTES_PER_CHECKSUM)


def with_side_files(store: Store, paths: tuple[str, ...]) -> tuple[str, ...]:
    """``paths`` and, where the file system keeps them, their ``.crc`` side files."""
    if not store.keeps_crc:
        return paths
    return tuple(p for rel in paths for p in (rel, crc_rel(rel)))


def _is_crc(rel: str) -> bool:
    name = rel.rpartition("/")[2]
    return name.startswith(".") and name.endswith(".crc")


def _data_rel(side_rel: str) -> str:
    parent, _, name = side_rel.rpartition("/")
    return f"{parent}/{name[1:-4]}" if parent else name[1:-4]


def replace_files(store: Store, files: Mapping[str, bytes | None]) -> None:
    """Put ``files`` in place (``None`` removes) so that at every step Spark can read each file:
    for a data file and its side file, the old side file goes first, then the data file is
    replaced atomically, then the new side file is written (HDFS ChecksumFs: a missing ``.crc`` is
    accepted, a stale one is a ChecksumException)."""
    side = {rel: data for rel, data in files.items() if _is_crc(rel)}
    done: set[str] = set()
    for rel, data in files.items():
        if _is_crc(rel):
            continue
        crc = crc_rel(rel)
        if crc in side:
            store.remove(crc)
        if data is None:
            store.remove(rel)
        else:
            store.write_atomic(rel, data)
        if crc in side:
            new = side[crc]
            if new is not None:
                store.write_atomic(crc, new)
            done.add(crc)
    for crc, new in side.items():  # side files whose data file does not change
        if crc in done:
            continue
        if new is None:
            store.remove(crc)
        elif store.read(_data_rel(crc)) is None or checksum_file_matches(store, crc, new):
            store.write_atomic(crc, new)
        else:  # never pair a data file with a side file that does not match it
            store.remove(crc)


def checksum_file_matches(store: Store, side_rel: str, crc: bytes) -> bool:
    """Whether ``crc``, the new bytes of the side file ``side_rel``, match its data file as it is."""
    data = store.read(_data_rel(side_rel))
    return data is not None and checksum_matches(data, crc)
