"""Dead workers and killed sweeps lose no finished result."""

import re
import signal
from pathlib import Path

import numpy as np
import xarray as xr
from distributed import Client

from pipeline.results import damage
from pipeline.results.methods import MEASURED
from pipeline.sweep import run

from helpers import assert_same_values
from sweeping import (
    TINY,
    dask_process,
    done_count,
    kill_group,
    scheduler_address,
    start_sweep,
    sweep,
    wait_for,
)

SLOW = ["timing.min_seconds=0.25", "grid.families=[bell,uniform]", "grid.modes=[predict,filter]"]
"""Two families and two modes, every cell timing runs for at least 0.25 s: long enough to
interrupt."""
TOTAL = 96


def test_a_worker_killed_mid_sweep_on_a_real_scheduler(tmp_path):
    scheduler = dask_process(
        "scheduler",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--no-dashboard",
        "--scheduler-file",
        "scheduler.json",
        cwd=tmp_path,
    )
    workers = []
    try:
        address = scheduler_address(tmp_path / "scheduler.json")
        workers = [
            dask_process(
                "worker",
                address,
                "--nthreads",
                "1",
                "--no-nanny",
                "--no-dashboard",
                "--name",
                f"w{i}",
                cwd=tmp_path,
            )
            for i in range(2)
        ]
        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        store = tmp_path / "r.zarr"
        sweeping = start_sweep(
            "experiment=smoke",
            "cluster=address",
            f"cluster.address={address}",
            f"store={store}",
            *SLOW,
            cwd=tmp_path,
        )
        wait_for(lambda: done_count(store) >= 4, 120, "the first finished cells")
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(timeout=30)
        _, err = sweeping.communicate(timeout=240)
        assert sweeping.returncode == 0, err
        ds = xr.open_zarr(store)
        assert int(ds.done.sum()) == TOTAL and not bool(ds.failed.any())
        with Client(address, timeout=30) as client:
            assert len(client.scheduler_info()["workers"]) == 1
    finally:
        for process in [*workers, scheduler]:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


def test_a_killed_sweep_resumes_to_the_uninterrupted_result(client, tmp_path):
    whole = ["experiment=smoke", *SLOW[1:], f"store={tmp_path / 'w.zarr'}"]
    expected = run(whole, client=client).load()

    interrupted = start_sweep(*TINY, *SLOW, "store=resumed.zarr", cwd=tmp_path)
    store = tmp_path / "resumed.zarr"
    wait_for(lambda: done_count(store) >= 6, 120, "the first finished cells")
    kill_group(interrupted)
    survived = done_count(store)
    assert 6 <= survived < TOTAL and interrupted.poll() is not None

    again = sweep(*TINY, *SLOW, "store=resumed.zarr", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    computed, already = map(
        int, re.search(r"(\d+) cells to compute, (\d+) already done", again.stderr).groups()
    )
    assert already == survived and computed == TOTAL - survived

    resumed = xr.open_zarr(store).load()
    assert set(resumed.data_vars) == set(expected.data_vars)
    assert_same_values(resumed, expected)
    for name in MEASURED:
        assert bool(np.isfinite(resumed[name].where(resumed.in_grid, 0)).all()), name


def test_two_sweeps_started_together_on_one_store(tmp_path):
    """One runs; the other stops at once with the lock line; the store ends sound and whole."""
    slow = "timing.min_seconds=0.25"  # the first still runs when the second starts
    runs = [start_sweep(*TINY, slow, "store=shared.zarr", cwd=tmp_path) for _ in range(2)]
    outcomes = [(process.wait(timeout=240), process.stderr.read()) for process in runs]
    for process in runs:
        process.stdout.close()
        process.stderr.close()
    assert sorted(code for code, _ in outcomes) == [0, 2], outcomes
    (refused,) = [err for code, err in outcomes if code == 2]
    store = tmp_path / "shared.zarr"
    assert re.fullmatch(
        rf"error: store: {re.escape(str(Path('shared.zarr')))} is locked by a sweep on \S+ "
        r"\(PID \d+, since [0-9T:+-]+\); wait for it to finish or stop it, then run the same "
        r"command again \(reading the store needs no lock\)",
        refused.strip().splitlines()[-1],
    ), refused
    assert "Dask scheduler" not in refused  # stopped before any cluster started
    assert done_count(store) == 288 and not damage(store)


def test_a_cell_out_of_memory_fails_once_in_one_line_and_the_others_finish(tmp_path):
    result = sweep(
        *TINY,
        "cluster.n_workers=1",
        "cluster.memory_limit=450MiB",
        "grid.families=[bell]",
        "grid.n_states=[20,4000]",  # 4000 states: too few to estimate, too many for 450 MiB
        "grid.methods={topp:[0.9]}",
        "grid.seeds=[0]",
        "grid.modes=[predict,filter]",
        "retries=0",
        "fuse_states=10000",
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stderr
    ds = xr.open_zarr(tmp_path / "outputs" / "smoke" / "results.zarr").load()
    big = ds.sel(family="bell", n_states=4000)
    assert not bool(big.done.any()) and bool(big.failed.all())
    assert {str(m) for m in big.error.values.flat} == {
        "ran out of memory on a worker (limit 0.44 GiB; 1 attempt)"
    }
    assert bool(ds.sel(family="bell", n_states=20).done.all())
    assert "2 cells failed" in result.stderr
    assert "memory budget" not in result.stderr  # distributed's warning: in the log
    logs = list((tmp_path / "outputs" / "smoke" / "hydra").glob("*/main.log"))
    assert any("memory budget" in log.read_text() for log in logs)
