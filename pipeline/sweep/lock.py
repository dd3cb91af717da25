"""One writer per store: an exclusive lock that dies with the process holding it.

A sweep holds ``<store>.lock`` (beside the store, so replacing the store never touches it)
locked with ``fcntl.flock`` for as long as it writes; the file names the holder (host, PID,
start time) for whoever finds it locked. The operating system releases the lock when its
process ends however it ends (SIGKILL included), so a dead holder's lock is simply taken
over. Readers (``python -m pipeline.analyze``, ``xr.open_zarr``) never take it.

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
from pathlib import Path

from pipeline.sweep.config import ConfigError
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


def check_unlocked(store: Path) -> None:
    """Raise ``ConfigError`` (the lock line) if a live process holds ``store``'s lock; reads
    and writes nothing else (a free lock file is left as it is)."""
    path = lock_path(store)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ConfigError("store", _locked_line(Path(store), path)) from None
    finally:
        os.close(fd)  # releases the lock if we took it


class StoreLock:
    """``with StoreLock(store):`` holds the store's lock, or raises ``ConfigError`` at once
    (one line naming the holder and what to do) when another process holds it."""

    def __init__(self, store: Path):
        self.store, self.path = Path(store), lock_path(store)
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ConfigError("store", _locked_line(self.store, self.path)) from None
            # the holder before us may have removed the file after we opened it: lock the
            # file that is at the path now
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        holder = {"host": platform.node(), "pid": os.getpid(), "start": now()}
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(holder).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)  # while still held: a waiter re-checks the path
        os.close(self._fd)  # closing releases the lock
        self._fd = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
