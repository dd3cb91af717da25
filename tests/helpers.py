"""Helpers shared by the tests."""

import numpy as np


def random_stochastic(rng: np.random.Generator, rows: int, columns: int, zeros: float = 0.0):
    """A row-stochastic matrix with about a fraction ``zeros`` of exact zeros (never a zero row)."""
    matrix = rng.random((rows, columns))
    matrix[rng.random((rows, columns)) < zeros] = 0.0
    matrix[np.arange(rows), rng.integers(0, columns, rows)] += 0.1
    return matrix / matrix.sum(axis=1, keepdims=True)


# --- running the sweep and Dask processes for real -------------------------------------------

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import zarr  # noqa: E402

TINY = ["experiment=smoke", "cluster.dashboard_address=:0", "cluster.n_workers=2"]
"""A seconds-long sweep on a 2-worker LocalCluster with a free dashboard port."""


def sweep(*overrides: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``python -m pipeline.sweep`` as a user would, in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline.sweep", *overrides],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_sweep(*overrides: str, cwd: Path) -> subprocess.Popen:
    """Start a sweep in its own process group (so it can be killed with its workers)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.sweep", *overrides],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL a process started by ``start_sweep`` and everything it started."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def done_count(store: Path) -> int:
    """Cells marked done in a store another process is writing (0 before it exists)."""
    try:
        group = zarr.open_group(store, mode="r", use_consolidated=False)
        return int(group["done"][...].sum())
    except (FileNotFoundError, KeyError, ValueError):
        return 0


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.1)


def dask_process(*arguments: str, cwd: Path) -> subprocess.Popen:
    """``dask <arguments>`` (the dask CLI) as a child process."""
    return subprocess.Popen(
        [sys.executable, "-m", "dask", *arguments],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def scheduler_address(scheduler_file: Path, timeout: float = 60) -> str:
    wait_for(scheduler_file.exists, timeout, "the scheduler file")
    wait_for(
        lambda: scheduler_file.read_text().strip().endswith("}"),
        timeout,
        "the scheduler file to be complete",
    )
    return json.loads(scheduler_file.read_text())["address"]
