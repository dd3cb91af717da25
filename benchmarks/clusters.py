"""Sweep overhead per cell on each cluster back-end of this machine, in one run.

    python benchmarks/clusters.py        # as root: brings up Slurm and sshd on loopback

The same 512 small cells (``sweep_throughput.SMALL``) run on two workers of each
back-end: ``local`` (a LocalCluster), ``address`` (a `dask scheduler` and two `dask worker`
processes), ``slurm`` (two one-core batch jobs through dask-jobqueue) and ``ssh``
(SSHCluster through sshd, two worker hosts), each on 127.0.0.1, ``ROUNDS`` times in turn.
Overhead per cell = (workers x wall time of the compute phase - time the workers spent in
tasks) / cells, as in part 4 of ``bench.py``; start = connecting until a worker is there.
Medians over the rounds. The back-ends come from the test kit, ``tests/clusters/kit.py``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cloudpickle

from pipeline.sweep.backends.address import AddressClusterConfig
from pipeline.sweep.backends.jobqueue import JobqueueClusterConfig
from pipeline.sweep.backends.local import LocalClusterConfig
from pipeline.sweep.backends.ssh import SSHClusterConfig
from pipeline.sweep.cluster import connect
from pipeline.sweep.config import compose, validate
from pipeline.sweep.provenance import cpu, memory
from pipeline.sweep.store import ResultStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "clusters"))
sys.path.insert(0, str(Path(__file__).parent))
import kit
import sweep_throughput
from sweep_throughput import SMALL, _warm, timed_compute

cloudpickle.register_pickle_by_value(sweep_throughput)  # workers cannot import benchmarks/

ROUNDS = 3
LOOPBACK = {"host": "127.0.0.1", "dashboard_address": ":0"}


def _entries(address: str, sshd: kit.Sshd) -> dict[str, object]:
    return {
        "local": LocalClusterConfig(n_workers=2, dashboard_address=":0"),
        "address": AddressClusterConfig(address=address),
        "slurm": JobqueueClusterConfig(
            kind="slurm", jobs=2, memory="2GiB", walltime="00:30:00", **LOOPBACK
        ),
        "ssh": SSHClusterConfig(
            hosts=["127.0.0.1"] * 3, connect_options=sshd.connect_options, **LOOPBACK
        ),
    }


def _run(name: str, folder: Path, entries: dict) -> tuple[float, float, int]:
    """(start seconds, overhead seconds per cell, cells) of one sweep of SMALL on ``name``."""
    store = folder / f"{name}-{time.monotonic_ns()}.zarr"
    overrides = [*SMALL, f"cluster={name}", f"store={store}", "progress_seconds=1000"]
    cfg, _ = compose(overrides, clusters=entries)
    kind = validate(cfg)
    grid = kind.grid(cfg)
    start = time.perf_counter()
    with connect(cfg.cluster) as client:
        started = time.perf_counter() - start
        client.wait_for_workers(2, timeout=120)
        client.run(_warm)
        results = ResultStore.open(store, kind.SCHEMA, grid, {})
        wall, busy = timed_compute(client, grid, results, cfg)
    cells = len(grid.cells())
    return started, (2 * wall - busy) / cells, cells


def _address_cluster(folder: Path) -> tuple[str, list[subprocess.Popen]]:
    """A `dask scheduler` and two `dask worker` processes on 127.0.0.1."""
    dask = [sys.executable, "-m", "dask"]
    scheduler_file = folder / "scheduler.json"
    listen = ["--host", "127.0.0.1", "--no-dashboard"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [*dask, "scheduler", *listen, "--port", "0", "--scheduler-file", str(scheduler_file)],
        **quiet,
    )
    kit.wait_until(lambda: scheduler_file.exists() and scheduler_file.read_text(), 60, "scheduler")
    address = json.loads(scheduler_file.read_text())["address"]
    workers = [
        subprocess.Popen([*dask, "worker", address, *listen, "--nthreads", "1"], **quiet)
        for _ in range(2)
    ]
    return address, [scheduler, *workers]


def main() -> None:
    slurm, sshd = kit.Slurm().start(), kit.Sshd().start()
    processes: list[subprocess.Popen] = []
    try:
        os.environ["SLURM_CONF"] = slurm.env["SLURM_CONF"]
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            address, processes = _address_cluster(folder)
            entries = _entries(address, sshd)
            names = ["local", "address", "slurm", "ssh"]
            measured = {name: [] for name in names}
            for _ in range(ROUNDS):
                for name in names:
                    measured[name].append(_run(name, folder, entries))
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        slurm.stop()
        sshd.stop()
    cells = measured["local"][0][2]
    machine = f"{platform.node()}: {cpu()}, {os.cpu_count()} cores, {memory()}"
    print(f"{machine}, Python {platform.python_version()}; {cells} cells on 2 workers")
    print(f"medians of {ROUNDS} rounds")
    print(f"{'back-end':10} {'start s':>8} {'overhead ms/cell':>17}   (every round)")
    for name, rounds in measured.items():
        starts, overheads, _ = zip(*rounds, strict=True)
        every = ", ".join(f"{value * 1e3:.2f}" for value in overheads)
        print(
            f"{name:10} {statistics.median(starts):8.2f} "
            f"{statistics.median(overheads) * 1e3:17.2f}   ({every})"
        )


if __name__ == "__main__":
    main()
