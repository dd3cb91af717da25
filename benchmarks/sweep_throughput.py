"""Part 4 of the benchmark: sweep throughput, per-cell overhead, and Hydra multirun."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distributed import get_task_stream

from pipeline.sweep.cluster import connect
from pipeline.sweep.config import compose, for_config, validate
from pipeline.sweep.engine import compute
from pipeline.sweep.kind import Grid
from pipeline.sweep.store import ResultStore

SMALL = [
    "experiment=smoke",
    "grid.families=[bell,dirichlet]",
    "grid.n_states=[30,60]",
    "grid.methods={topp:[0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.95]}",
    "grid.seeds=[0,1,2,3,4,5,6,7]",
    "grid.horizon=20",
    "timing.repeats=3",
    "timing.min_seconds=0",
]
"""512 small top-p cells: 2 families x 2 sizes x 8 p x 8 seeds x 2 modes."""
BUSY = [
    "experiment=smoke",
    "grid.families=[dirichlet]",
    "grid.n_states=[200]",
    "grid.methods={topp:[0.5,0.7,0.9,0.95]}",
    "grid.seeds=[0,1,2,3,4,5,6,7]",
    "grid.horizon=50",
    "timing.min_seconds=0.1",
]
"""64 CPU-bound cells: each times its runs for at least 0.1 s."""


def _config(overrides: list[str], workers: int, store: Path):
    cfg, _ = compose(
        [
            *overrides,
            f"cluster.n_workers={workers}",
            "cluster.dashboard_address=:0",
            f"store={store}",
            "progress_seconds=1000",
        ]
    )
    validate(cfg)
    return cfg


def _warm(_=None) -> None:
    """Load the compiled kernels in a worker, so the sweep does not time numba's cache."""
    import numpy as np

    from pipeline.inference import filtering
    from pipeline.methods.topp import topp_hmm
    from pipeline.models import build_model

    hmm = build_model("bell", 10)
    filtering(hmm, np.zeros(3, int))
    filtering(topp_hmm(hmm, 0.9), np.zeros(3, int))


def run_grid(overrides: list[str], workers: int) -> tuple[int, float, float]:
    """(cells, wall seconds of the compute phase, seconds the workers spent in tasks)."""
    with tempfile.TemporaryDirectory() as folder:
        cfg = _config(overrides, workers, Path(folder) / "r.zarr")
        kind = for_config(cfg)
        grid = kind.grid(cfg)
        with connect(cfg.cluster) as client:
            client.run(_warm)
            store = ResultStore.open(Path(cfg.store), kind.SCHEMA, grid, {})
            wall, busy = timed_compute(client, grid, store, cfg)
    return len(grid.cells()), wall, busy


def timed_compute(client, grid: Grid, store: ResultStore, cfg) -> tuple[float, float]:
    """The sweep's compute phase: its wall seconds and the seconds workers spent in tasks."""
    with get_task_stream(client) as stream:
        start = time.perf_counter()
        compute(client, for_config(cfg), grid, store, cfg)
        wall = time.perf_counter() - start
    busy = sum(
        part["stop"] - part["start"]
        for task in stream.data
        for part in task["startstops"]
        if part["action"] == "compute"
    )
    return wall, busy


def multirun(jobs: int) -> tuple[int, float]:
    """Hydra's multirun of ``jobs`` single-cell sweeps (each starts its own cluster)."""
    settings = ",".join(f"{{topp:[{0.3 + 0.05 * k:.2f}]}}" for k in range(jobs))
    with tempfile.TemporaryDirectory() as folder:
        command = [
            sys.executable,
            "-m",
            "pipeline.sweep",
            "-m",
            "experiment=default",  # top-p alone: a multirun merges a swept mapping into it
            "grid.families=[bell]",
            "grid.n_states=[30]",
            "grid.seeds=[0]",
            "grid.modes=[predict]",
            "grid.horizon=20",
            "timing.min_seconds=0",
            "cluster.n_workers=1",
            "cluster.dashboard_address=:0",
            f"grid.methods={settings}",
        ]
        start = time.perf_counter()
        subprocess.run(command, cwd=folder, check=True, capture_output=True)
        return jobs, time.perf_counter() - start


def throughput(target) -> None:
    print("\n4. Sweep throughput (LocalCluster of worker processes, one thread each)")
    rates = {}
    for workers in (1, 2):
        cells, wall, busy = run_grid(SMALL, workers)
        overhead = (workers * wall - busy) / cells
        rates[workers] = cells / wall
        print(
            f"   {cells} small cells, {workers} worker(s): {wall:6.2f} s, "
            f"{cells / wall:7.1f} cells/s; tasks busy {busy / cells * 1e3:5.2f} ms per cell, "
            f"overhead {overhead * 1e3:5.2f} ms per cell"
        )
        if workers == 1:
            target(
                "sweep per-cell overhead <= 5 ms (1 worker)",
                f"{overhead * 1e3:.2f} ms",
                overhead <= 0.005,
            )
    busy_rates = {}
    for workers in (1, 2):
        cells, wall, busy = run_grid(BUSY, workers)
        busy_rates[workers] = cells / wall
        print(
            f"   {cells} CPU-bound cells, {workers} worker(s): {wall:6.2f} s, "
            f"{cells / wall:6.2f} cells/s"
        )
    scaling = busy_rates[2] / busy_rates[1]
    print(f"   2 workers / 1 worker on CPU-bound cells: {scaling:.2f}x")
    target("2 workers >= 1.7x one worker (CPU-bound cells)", f"{scaling:.2f}x", scaling >= 1.7)
    jobs, seconds = multirun(6)
    hydra_rate = jobs / seconds
    print(
        f"   Hydra multirun, {jobs} single-cell jobs: {seconds:.1f} s, {hydra_rate:.2f} cells/s; "
        f"the sweep (2 workers) is {rates[2] / hydra_rate:.0f}x faster"
    )
    target(
        "sweep >= 10x a Hydra multirun of single cells",
        f"{rates[2] / hydra_rate:.0f}x",
        rates[2] / hydra_rate >= 10,
    )
