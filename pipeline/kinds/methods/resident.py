"""A process's peak resident memory, reset and read around one cell (Linux's ``VmHWM``)."""

from __future__ import annotations

import contextlib

import numpy as np


def reset_peak() -> bool:
    """Reset this process's peak resident memory (Linux: ``VmHWM``); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def peak() -> float:
    """This process's peak resident memory in bytes since the last reset (NaN: unknown)."""
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) * 1024
    return np.nan
