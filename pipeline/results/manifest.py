"""A store's manifests: the checksum of every chunk file, by the chunk's position.

A chunk's own CRC32C (its last codec) says whether its bytes are intact, not whether they
belong where they lie: zarr reads a missing chunk file as the array's fill value (NaN,
False), and a whole chunk copied over another position decodes. Each array's folder holds,
beside its ``zarr.json``, a ``manifest.json`` listing every chunk file the sweep wrote by
its key (``c/0/1/0/0/0/0/0``: the chunk's position) with the CRC-32 of its bytes (zarr
reads neither the file nor anything else in that folder but ``zarr.json`` and ``c/``). A
file whose checksum is not among its key's entries, a listed file that is missing and a
file where none is listed are damage (``pipeline.results.verify.damage`` names them).

A flush writes its chunks to temporary files, then the manifests accepting the old and the
new bytes of each (a list of checksums; None: no file), then renames the chunks into place,
then the manifests with the new bytes only: an interruption at any point leaves every chunk
matching its entry. Chunks and the manifests that accept them are fsynced before the rename
that publishes them, and their directories after (``pipeline.results.durable``); the
manifests that only narrow are renamed into place without fsync (a power loss may leave the
ones before them, which accept every chunk on disk).

A store written before manifests has none: its chunks are trusted on their CRC32C alone, and
the sweep's next run writes them (from the chunks that read). In memory, the manifests of a
store are one mapping, by the chunk's key in the store (``tv/c/0/1/0/0/0/0/0``).
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import NamedTuple

from pipeline.results.durable import checksum, is_temporary, write_durably

MANIFEST = "manifest.json"
"""The manifest's file name, in each array's folder."""
VERSION = 1

Entries = dict[str, list[str | None]]
"""Chunk key in the store -> the checksums its file may have (None: no file; none at all:
no file can be trusted there, an array rebuilt whose chunks are not yet written again); a
key not listed has no file."""


MAX_FILE_BYTES = 1 << 28
"""The most bytes read from any one file of a store whose own limit is not known (a manifest,
a ``zarr.json``): far above what a sweep writes, far below a machine's memory."""


def file_problem(file: Path, limit: int = MAX_FILE_BYTES) -> str:
    """Why ``file`` cannot be one of a store's files, which are regular files of at most
    ``limit`` bytes: a link, a directory, a device or FIFO, or too large; "" if it can be
    (or it does not exist). Looks at the file's entry (``lstat``), never at its bytes."""
    try:
        entry = Path(file).lstat()
    except (FileNotFoundError, NotADirectoryError):
        return ""
    if stat.S_ISLNK(entry.st_mode):
        return "it is a symbolic link, not a file the sweep wrote"
    if stat.S_ISDIR(entry.st_mode):
        return "it is a directory, not a file the sweep wrote"
    if not stat.S_ISREG(entry.st_mode):
        return "it is a device, FIFO or socket, not a file the sweep wrote"
    if entry.st_size > limit:
        return f"it holds {entry.st_size:,} bytes, more than it can ({limit:,})"
    return ""


def read_bounded(file: Path, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """``file``'s bytes, never more than ``limit`` of them read; None if there is no such
    file. ``ValueError`` (``file_problem``'s words) for a file that cannot be a store's."""
    problem = file_problem(file, limit)
    if problem:
        raise ValueError(problem)
    try:
        with open(file, "rb") as stream:
            data = stream.read(limit + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if len(data) > limit:  # it grew since it was looked at
        raise ValueError(f"it holds more than {limit:,} bytes")
    return data


def file_checksum(file: Path, limit: int = MAX_FILE_BYTES) -> str | None:
    """The checksum of ``file``'s bytes; None if there is no such file. ``ValueError`` for a
    file that cannot be a store's (``file_problem``)."""
    data = read_bounded(file, limit)
    return None if data is None else checksum(data)


def _array_folders(store: Path) -> list[str]:
    return sorted(p.name for p in store.iterdir() if p.is_dir())


def _read(file: Path) -> tuple[dict | None, str]:
    """One array's manifest: its chunks by key in the array, or why it cannot be read."""
    try:
        text = read_bounded(file)
    except ValueError as error:
        return None, str(error)
    if text is None:
        return None, "it is missing"
    if not text.strip():
        return None, "it is empty"
    try:
        content = json.loads(text)
    except ValueError:
        return None, "it is cut short or is not JSON"
    chunks = content.get("chunks") if isinstance(content, dict) else None
    if not isinstance(chunks, dict) or not all(isinstance(v, list) for v in chunks.values()):
        return None, "it lists no chunks"
    return chunks, ""


class Manifests(NamedTuple):
    """The manifests of a store's arrays, read."""

    entries: Entries
    """The chunks of the arrays in ``covered``, by their key in the store."""
    covered: frozenset[str]
    """The arrays whose manifest reads; the others' chunks are trusted on their CRC32C."""
    problems: dict[str, str]
    """Array -> why its manifest cannot be read (a missing one is named only where another
    array has one: a store from before manifests has none)."""


def load(store, names=None) -> Manifests:
    """The manifests of the arrays ``names`` (default: every array) of the store at
    ``store``."""
    store = Path(store)
    entries, covered, problems = {}, set(), {}
    for name in _array_folders(store) if names is None else names:
        chunks, why = _read(store / name / MANIFEST)
        if chunks is None:
            problems[name] = why
            continue
        covered.add(name)
        entries.update({f"{name}/{key}": sums for key, sums in chunks.items()})
    if not covered and names is None:
        problems = {name: why for name, why in problems.items() if why != "it is missing"}
    return Manifests(entries, frozenset(covered), problems)


def files(store, entries: Entries, names) -> dict[Path, bytes]:
    """The manifests of the arrays ``names`` of the store at ``store`` from ``entries``: each
    manifest's path and bytes."""
    store = Path(store)
    by_array: dict[str, dict] = {name: {} for name in names}
    for key, sums in entries.items():
        name, within = key.split("/", 1)
        if name in by_array:
            by_array[name][within] = sums
    return {
        store / name / MANIFEST: json.dumps(
            {"version": VERSION, "chunks": dict(sorted(chunks.items()))}, indent=0
        ).encode()
        for name, chunks in by_array.items()
    }


def write(store, entries: Entries, names) -> None:
    """Write the manifests of the arrays ``names`` of the store at ``store`` from
    ``entries``, durably and together."""
    write_durably(files(store, entries, names))


def chunk_files(store, names=None) -> dict[str, Path]:
    """Every chunk file of the arrays ``names`` (default: all) of the store at ``store``, by
    its key (the entries under the arrays' ``c/`` folders that are no folders, temporary
    files aside: a link or a device where a chunk belongs is listed too)."""
    store = Path(store)
    return {
        file.relative_to(store).as_posix(): file
        for name in (_array_folders(store) if names is None else names)
        for file in (store / name / "c").rglob("*")
        if (file.is_symlink() or not file.is_dir()) and not is_temporary(file.name)
    }


def scan(store, names=None, skip=()) -> Entries:
    """Manifests of what the arrays ``names`` (default: all) of the store at ``store`` hold,
    for arrays that have none: every chunk file's checksum, the keys in ``skip`` (chunks
    that do not read) and files that cannot be chunks (``file_problem``) aside."""
    return {
        key: [file_checksum(file)]
        for key, file in chunk_files(store, names).items()
        if key not in skip and not file_problem(file)
    }


def settled(entries: Entries, store) -> Entries:
    """``entries`` with each key that accepts several checksums (a flush was interrupted)
    reduced to its file's, where that is accepted; keys of no file dropped."""
    out = {}
    for key, accepted in entries.items():
        if len(accepted) > 1 and not file_problem(Path(store, key)):
            actual = file_checksum(Path(store, key))
            accepted = [actual] if actual in accepted else accepted
        if accepted != [None]:
            out[key] = accepted
    return out
