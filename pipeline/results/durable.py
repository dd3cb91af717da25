"""Writes that survive a crash or a power loss: fsynced files, renamed into place.

A file is written to a hidden temporary file beside its place, fsynced, renamed into place,
and its directory fsynced (``write_durably``): whatever happens, the old file or the new one
is there, whole. ``DurableStore`` is zarr's local store written that way, with its chunks
held back (staged) until ``publish`` puts them in place together, so a writer can list them
in the store's manifest (``pipeline.results.manifest``) before any of them is in place.
"""

from __future__ import annotations

import asyncio
import os
import uuid
import zlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from zarr.core.buffer import Buffer
from zarr.storage import LocalStore

SYNC_THREADS = 16
"""fsyncs run side by side: the file system commits its journal once for many of them."""


def checksum(data: bytes) -> str:
    """The CRC-32 of ``data``, as 8 hex digits (what a store's manifest lists)."""
    return f"{zlib.crc32(data):08x}"


def is_temporary(name: str) -> bool:
    """Whether a file name is a temporary file a write renames into place: ours
    (``.<name>.<random>.partial``) or zarr's (``<name>.<random>.partial``)."""
    return name.endswith(".partial")


def temporary(file: Path) -> Path:
    """A hidden temporary file beside ``file``, for a write renamed into place."""
    return file.with_name(f".{file.name}.{uuid.uuid4().hex}.partial")


def sync(path: Path) -> None:
    """fsync a file (its bytes reach the disk) or a directory (its entries do)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_all(paths) -> None:
    """fsync many files or directories side by side (``SYNC_THREADS`` at a time)."""
    paths = list(dict.fromkeys(paths))
    if len(paths) < 2:
        for path in paths:
            sync(path)
        return
    with ThreadPoolExecutor(min(SYNC_THREADS, len(paths))) as pool:
        list(pool.map(sync, paths))


def sync_tree(root: Path) -> None:
    """fsync every file and directory under ``root``, and ``root`` (before it is renamed into
    place)."""
    paths = [root, *root.rglob("*")]
    sync_all(p for p in paths if p.is_file())
    sync_all(p for p in paths if p.is_dir())


def make_directories(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; the directories whose entries changed
    (to fsync)."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for new in reversed(missing):
        new.mkdir(exist_ok=True)
    return [new.parent for new in missing]


def _temporaries(files: dict[Path, bytes]) -> tuple[dict[Path, Path], list[Path]]:
    """Each file's bytes written to a temporary file beside it (not yet fsynced): file ->
    its temporary file, and the directories whose entries changed."""
    temps, changed = {}, []
    try:
        for file, data in files.items():
            file = Path(file)
            changed += make_directories(file.parent)
            temps[file] = temporary(file)
            temps[file].write_bytes(data)
    except BaseException:
        for temp in temps.values():
            temp.unlink(missing_ok=True)
        raise
    return temps, changed


def _put_in_place(groups: Sequence[Mapping[Path, Path | None]], changed=()) -> None:
    """fsync the temporary files of every group (file -> its temporary file; None: remove
    the file) and the directories in ``changed`` at once, then put each group in place in
    turn: renamed, then its directories fsynced, before the next group. An error leaves the
    files not yet renamed as they were, and no temporary file."""
    try:
        sync_all([temp for group in groups for temp in group.values() if temp is not None])
        sync_all(changed)
        for group in groups:
            directories = set()
            for file, temp in group.items():
                if temp is not None:
                    os.replace(temp, file)
                elif file.exists():
                    file.unlink()
                else:
                    continue
                directories.add(file.parent)
            sync_all(directories)
    finally:
        for group in groups:
            for temp in group.values():
                if temp is not None:
                    temp.unlink(missing_ok=True)


def write_atomically(files: dict[Path, bytes]) -> None:
    """Write each file's bytes to a temporary file beside it and rename it into place,
    without fsync: a killed process leaves the old file or the new one; a power loss may
    leave the old one (for a file that only narrows what an fsynced one said)."""
    temps, _ = _temporaries(files)
    try:
        for file, temp in temps.items():
            os.replace(temp, file)
    finally:
        for temp in temps.values():
            temp.unlink(missing_ok=True)


def write_durably(files: dict[Path, bytes]) -> None:
    """Write each file's bytes so that a crash or a power loss leaves the old file or the new
    one, whole: temporary files beside them, fsynced together, renamed into place, their
    directories fsynced. An error leaves the files not yet renamed as they were, and no
    temporary file."""
    temps, changed = _temporaries(files)
    _put_in_place([temps], changed)


def _is_metadata(key: str) -> bool:
    return key == "zarr.json" or key.endswith("/zarr.json")


class Staged(NamedTuple):
    """A chunk written but not yet in place: its temporary file (None: the chunk is to be
    removed, as zarr removes a chunk that holds only the fill value) and its checksum."""

    temp: Path | None
    checksum: str | None


class DurableStore(LocalStore):
    """zarr's ``LocalStore`` for a writer that keeps a manifest: durable, chunks staged.

    Metadata (``zarr.json``) is written at once with ``write_durably``. A chunk is written to
    a temporary file beside its place and held in ``staged`` (by its key, with its
    ``checksum``) until ``publish`` fsyncs the staged files together, renames them into
    place in the order they were written (after the files that must precede them) and
    fsyncs their directories; ``discard`` drops them.
    """

    def __init__(self, root: Path | str, *, read_only: bool = False):
        super().__init__(root, read_only=read_only)
        self.staged: dict[str, Staged] = {}
        self._directories: set[Path] = set()

    def with_read_only(self, read_only: bool = False) -> DurableStore:
        other = type(self)(self.root, read_only=read_only)
        other.staged, other._directories = self.staged, self._directories
        return other

    async def _set(self, key: str, value: Buffer, exclusive: bool = False) -> None:
        if not self._is_open:
            await self._open()
        self._check_writable()
        await asyncio.to_thread(self._write, key, value.to_bytes(), exclusive)

    def set_sync(self, key: str, value: Buffer) -> None:
        self._ensure_open_sync()
        self._check_writable()
        self._write(key, value.to_bytes())

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self.delete_sync, key)

    def delete_sync(self, key: str) -> None:
        if _is_metadata(key) or (self.root / key).is_dir():
            super().delete_sync(key)
        else:
            self._check_writable()
            self._stage(key, None, None)

    def _write(self, key: str, data: bytes, exclusive: bool = False) -> None:
        path = self.root / key
        if exclusive and path.exists():
            return
        if _is_metadata(key):
            write_durably({path: data})
            return
        self._directories.update(make_directories(path.parent))
        temp = temporary(path)
        try:
            temp.write_bytes(data)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        self._stage(key, temp, checksum(data))

    def _stage(self, key: str, temp: Path | None, checksum: str | None) -> None:
        before = self.staged.pop(key, None)
        if before is not None and before.temp is not None:
            before.temp.unlink(missing_ok=True)
        self.staged[key] = Staged(temp, checksum)

    def publish(self, first: dict[Path, bytes] | None = None) -> None:
        """Put every staged chunk in place, after the files ``first`` (path -> bytes: what
        must be on disk before any of them, a manifest): every temporary file fsynced at
        once, ``first`` renamed and its directories fsynced, then the chunks renamed (or
        removed) in the order they were written and their directories fsynced."""
        early, changed = _temporaries(first or {})
        staged = dict(self.staged)
        self.staged.clear()
        chunks = {self.root / key: chunk.temp for key, chunk in staged.items()}
        directories = [*changed, *self._directories]
        self._directories.clear()
        _put_in_place([early, chunks], directories)

    def discard(self) -> None:
        """Drop every staged chunk (remove its temporary file)."""
        for chunk in self.staged.values():
            if chunk.temp is not None:
                chunk.temp.unlink(missing_ok=True)
        self.staged.clear()
