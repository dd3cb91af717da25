"""One writer per store: an exclusive lock that dies with the process holding it.

A sweep holds ``<store>.lock`` (beside the store, so replacing the store never touches it)
locked with ``fcntl.flock`` for as long as it writes; the file names the holder (host, PID,
start time) for whoever finds it locked. Once the store exists the sweep holds the store's
folder too (``hold_store``: an ``flock`` on the folder through an open descriptor), so a lock
file deleted while it runs admits no second writer: one that makes a new lock file still
finds the store held. Release removes the lock file only if it is still the one it holds.
The operating system releases both when their process ends however it ends (SIGKILL
included), so a dead holder's lock is simply taken over. Readers (``python -m
pipeline.analyze``, ``xr.open_zarr``) never take it.

On NFS, Linux emulates ``flock`` with the server's byte-range locks (NFSv4, or NLM for
v3): it excludes writers on every client, and a crashed client's lock is released when the
server's lease for it expires (about 90 s on NFSv4); a mount without locking (``nolock``)
makes the lock local to each machine. Only the local-disk behaviour is tested here.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import stat
from pathlib import Path

from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.provenance import now


def lock_path(store: Path) -> Path:
    """The lock file of ``store``: ``<store>.lock`` beside it."""
    store = Path(store)
    return store.with_name(store.name + ".lock")


def _holder(path: Path) -> str:
    try:
        holder = json.loads(path.read_text())
        return f"a sweep on {holder['host']} (PID {holder['pid']}, since {holder['start']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another sweep"


def _locked_line(store: Path, path: Path) -> str:
    return (
        f"{store} is locked by {_holder(path)}; wait for it to finish or stop it, then run the "
        "same command again (reading the store needs no lock)"
    )


def _take(path: Path, flags: int) -> int | None:
    """An open descriptor of ``path`` holding its exclusive ``flock``; None when another
    process holds it. ``FileNotFoundError`` when ``path`` does not exist (and ``flags`` do
    not create it)."""
    fd = os.open(path, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _not_a_file(path: Path) -> ConfigError:
    """The error of a lock path that holds something else than a file (not the sweep's to
    remove: it may be someone's)."""
    what = "a directory" if path.is_dir() else "not a regular file"
    return ConfigError(
        "store",
        f"{path} is {what}, where the store's lock file belongs; it should be a file: remove "
        "or rename it, then run the same command again",
    )


def _take_file(path: Path, flags: int) -> int | None:
    """``_take`` of the lock file ``path``; ``_not_a_file`` where a directory, a device or a
    FIFO is at its path."""
    try:
        fd = _take(path, flags)
    except IsADirectoryError:
        raise _not_a_file(path) from None
    if fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_a_file(path)
    return fd


def _store_folder(store: Path) -> int | None:
    """The store's folder held (its descriptor), or None if it is no folder; ``ConfigError``
    (the lock line) when another process holds it."""
    try:
        fd = _take(store, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if fd is None:
        raise ConfigError("store", _locked_line(store, lock_path(store)))
    return fd


def check_unlocked(store: Path) -> None:
    """Raise ``ConfigError`` (the lock line) if a live process holds ``store``'s lock or its
    folder; reads and writes nothing else (a free lock file is left as it is)."""
    store = Path(store)
    for take in (_lock_file, _store_folder):
        taken = take(store)
        if taken is not None:
            os.close(taken)  # releases the lock we took


def _lock_file(store: Path) -> int | None:
    """The existing lock file held (its descriptor), or None if there is none."""
    path = lock_path(store)
    try:
        fd = _take_file(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    if fd is None:
        raise ConfigError("store", _locked_line(store, path))
    return fd


class StoreLock:
    """``with StoreLock(store):`` holds the store's lock, or raises ``ConfigError`` at once
    (one line naming the holder and what to do) when another process holds it; once the
    store exists (now, or after ``hold_store`` when the sweep has made it) its folder too."""

    def __init__(self, store: Path):
        self.store, self.path = Path(store), lock_path(store)
        self._fd: int | None = None
        self._folder: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = _take_file(self.path, os.O_RDWR | os.O_CREAT)
            if fd is None:
                raise ConfigError("store", _locked_line(self.store, self.path))
            # the holder before us may have removed the file after we opened it: lock the
            # file that is at the path now
            if self._is_ours(fd):
                break
            os.close(fd)
        try:
            self._folder = _store_folder(self.store)
        except ConfigError:
            os.close(fd)  # its lock file was removed: the store is held all the same
            raise
        holder = {"host": platform.node(), "pid": os.getpid(), "start": now()}
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(holder).encode())
        self._fd = fd

    def hold_store(self) -> None:
        """Hold the store's folder as well, once the sweep has made it (a new store is made
        aside and renamed into place, a replaced one is a new folder)."""
        if self._folder is not None:
            os.close(self._folder)
        self._folder = _store_folder(self.store)

    def _is_ours(self, fd: int) -> bool:
        """Whether the lock file at the path is the one ``fd`` holds."""
        try:
            return os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        if self._fd is None:
            return
        if self._is_ours(self._fd):  # while still held: a waiter re-checks the path
            self.path.unlink(missing_ok=True)
        for fd in (self._folder, self._fd):
            if fd is not None:
                os.close(fd)  # closing releases the lock
        self._fd = self._folder = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
