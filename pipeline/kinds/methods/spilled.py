"""An exact run's history on its worker's disk: written once, read a chunk at a time.

A history larger than a cell may keep in memory (``modes.base.HISTORY_BYTES``; 51 steps of 10^7
states are 4.1 GB) is written by the model's reference task to a file in the worker's local
directory (Dask's, removed with the worker; outside a worker, the system's temporary
directory), and every cell of that model and mode reads it back chunk by chunk, instead of
running the same exact inference again beside its approximation. The file goes when the
reference that wrote it is released. A cell that cannot read it (on another machine, or
after its worker restarted) runs exact inference beside its approximation: the same numbers.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import weakref
from collections.abc import Iterator

import numpy as np
from distributed import get_worker

DTYPE = np.dtype(np.float64)


class SpilledHistory:
    """Beliefs of shape ``shape`` (steps, n_states), float64 in C order, in the file ``path``
    on the machine ``host``. Only the object ``Spill.close`` returns removes the file: a
    copy sent to another process does not."""

    def __init__(self, path: str, shape: tuple[int, ...], host: str):
        self.path, self.shape, self.host = path, tuple(shape), host

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * DTYPE.itemsize

    @contextlib.contextmanager
    def reader(self) -> Iterator[Reader | None]:
        """A ``Reader`` of the file while the block runs (its rows stay readable even if the
        file is removed meanwhile); None where it cannot be read whole here."""
        try:
            if self.host != socket.gethostname():
                raise OSError(f"{self.path} is on {self.host}")
            file = open(self.path, "rb")  # closed on leaving the block
        except OSError:
            yield None
            return
        with file:
            yield (
                Reader(file, self.shape) if os.fstat(file.fileno()).st_size == self.nbytes else None
            )


class Reader:
    """Rows of an open ``SpilledHistory``."""

    def __init__(self, file, shape: tuple[int, ...]):
        self.file, self.shape = file, shape

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Beliefs ``start:stop``, shape (stop - start, n_states), read into memory."""
        n = self.shape[1]
        self.file.seek(start * n * DTYPE.itemsize)
        return np.fromfile(self.file, DTYPE, count=(stop - start) * n).reshape(stop - start, n)


@contextlib.contextmanager
def rows_of(history, spans) -> Iterator[Iterator[np.ndarray] | None]:
    """The rows ``start:stop`` of a history for each ``(start, stop)`` of ``spans``, in that
    order, while the block runs: sliced from memory (an ndarray) or read from this machine's
    disk (a ``SpilledHistory``); None where there is nothing to read here (no history, or a
    file on another machine or not whole)."""
    opened = history.reader() if isinstance(history, SpilledHistory) else None
    with opened or contextlib.nullcontext() as reader:
        if reader is not None:
            yield (reader.rows(start, stop) for start, stop in spans)
        elif isinstance(history, np.ndarray):
            yield (history[start:stop] for start, stop in spans)
        else:
            yield None


def _local_directory() -> str:
    """The running Dask worker's local directory; outside a worker, the temporary one."""
    with contextlib.suppress(ValueError):  # not in a worker
        return get_worker().local_directory
    return tempfile.gettempdir()


class Spill:
    """A new file of the worker's local directory that a (steps, n_states) history is
    written to, consecutive rows at a time (``write``); ``close`` gives its
    ``SpilledHistory``, or None (and no file) where it could not be written whole, e.g. on
    a full disk. The file is removed once that history is released in this process."""

    def __init__(self, shape: tuple[int, int]):
        self.shape, self.path, self.file = tuple(shape), None, None
        with contextlib.suppress(OSError):  # a directory it cannot write: nothing is kept
            descriptor, self.path = tempfile.mkstemp(
                prefix="exact-history-", dir=_local_directory()
            )
            self.file = os.fdopen(descriptor, "wb")

    def write(self, rows: np.ndarray, *, start: int | None = None) -> bool:
        """Append ``rows`` (k, n_states), or write them as rows ``start:start + k`` (a history
        written latest rows first: smoothing's); False once a write has failed (nothing is
        kept)."""
        if self.file is None:
            return False
        try:
            if start is not None:
                self.file.seek(start * self.shape[1] * DTYPE.itemsize)
            self.file.write(np.ascontiguousarray(rows, dtype=DTYPE).data)
        except OSError:
            self._discard()
            return False
        return True

    def close(self) -> SpilledHistory | None:
        if self.file is None:
            return None
        try:
            self.file.close()
        except OSError:
            self._discard()
            return None
        assert self.path is not None, "a file has its path"
        history = SpilledHistory(self.path, self.shape, socket.gethostname())
        weakref.finalize(history, _remove, self.path)
        return history

    def _discard(self) -> None:
        assert self.file is not None and self.path is not None, "only a file is discarded"
        with contextlib.suppress(OSError):
            self.file.close()
        _remove(self.path)
        self.file = None


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
