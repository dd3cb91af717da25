"""Arrays kept from one batch to the next.

A fresh array of a few hundred megabytes costs its page faults on first touch, about as
much as a pass over it, and glibc hands allocations that large back to the system when
they are freed; a training run therefore keeps its per-batch buffers (the kernel's
features and their gradients, the softmax's blocks) in one ``Workspace``.

>>> work = Workspace()
>>> a = work.array("x", (2, 3), np.float32)
>>> a is work.array("x", (2, 3), np.float32), a is work.array("x", (3, 2), np.float32)
(True, False)
"""

from __future__ import annotations

import numpy as np


class Workspace:
    """Named buffers, each reused while its shape and dtype stay the same."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    @property
    def nbytes(self) -> int:
        """Bytes the buffers hold."""
        return sum(a.nbytes for a in self._arrays.values())

    def array(self, name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
        """The buffer ``name`` of this shape and dtype, uninitialised."""
        kept = self._arrays.get(name)
        if kept is None or kept.shape != tuple(shape) or kept.dtype != np.dtype(dtype):
            kept = self._arrays[name] = np.empty(shape, dtype)
        return kept


def scratch(work: Workspace | None, name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """``work``'s buffer ``name``, or a new array without one."""
    return np.empty(shape, dtype) if work is None else work.array(name, shape, dtype)
