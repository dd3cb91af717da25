"""The memory an argument may ask for: this machine's, checked before numpy allocates.

A model of ``10**12`` states or a horizon of ``10**12`` steps would need terabytes; numpy
would raise a ``MemoryError`` from deep inside (or, for a product past its index range, a
``ValueError`` naming no argument). ``check_memory`` refuses such an argument up front,
in one line naming it, the memory it would need and what is allowed. It sits beside
``pipeline.hmm``, below the families, inference and the sweep's sampler that check their
arguments with it.

>>> check_memory(8 * 10**15, "horizon=1,000,000,000,000", "8 bytes a step")
Traceback (most recent call last):
...
ValueError: horizon=1,000,000,000,000 needs 7,275.96 TiB of memory (8 bytes a step); allowed: ...
"""

from __future__ import annotations

import psutil

UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def machine_memory() -> int:
    """This machine's physical memory, in bytes."""
    return psutil.virtual_memory().total


def size(count: float) -> str:
    """``count`` bytes as a person reads them: 512 B, 3.40 MiB, 7,275.96 TiB."""
    for unit, scale in UNITS:
        if count >= scale:
            return f"{count / scale:,.2f} {unit}"
    return f"{count:.0f} B"


def check_memory(needed: float, arguments: str, detail: str) -> None:
    """Raise ``ValueError`` when ``needed`` bytes, what ``arguments`` (``"n_states=..."``)
    make the caller allocate (``detail`` says how), pass this machine's memory."""
    limit = machine_memory()
    if needed > limit:
        raise ValueError(
            f"{arguments} needs {size(needed)} of memory ({detail}); allowed: at most this "
            f"machine's {size(limit)}"
        )
