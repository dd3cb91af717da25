"""Dead workers and killed sweeps lose no finished result."""

import logging
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from distributed import Client

from pipeline.kinds.methods.results import MEASURED
from pipeline.results import damage
from pipeline.sweep import run

from helpers import assert_same_values, readme_blocks
from sweeping import (
    TINY,
    done_count,
    kill_group,
    start_sweep,
    sweep,
    wait_for,
)

SLOW = [
    "timing.min_seconds=0.25",
    "timing.max_repeats=1000",
    "grid.families=[bell]",
    "grid.modes=[predict,filter]",
    "flush_seconds=0.5",
]
"""One family and two modes, every cell's timing runs for at least 0.25 s and finished cells
flushed twice a second: a store to read while the sweep runs, long enough to interrupt."""
TOTAL = 48


def _recipe() -> tuple[list[list[str]], list[str]]:
    """The commands of ``docs/clusters.md``'s cluster started by hand, each split into words,
    on free ports instead of 8786 and 8787 (another process may hold them), ``.venv/bin/`` as
    this interpreter's folder: the scheduler and the workers (the lines ending in ``&``),
    then the sweep."""
    (block,) = [b for b in readme_blocks("bash", "docs/clusters.md") if "dask scheduler" in b]
    ports = {}
    for name in ("8786", "8787"):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports[name] = str(probe.getsockname()[1])
    lines = []
    for line in block.strip().splitlines():
        for old, new in ports.items():
            line = line.replace(old, new)
        words = line.replace(".venv/bin/", f"{Path(sys.executable).parent}/").split()
        lines.append(words)
    *background, sweep_command = lines
    assert all(words[-1] == "&" for words in background) and sweep_command[-1] != "&"
    return [words[:-1] for words in background], sweep_command


def _started(words: list[str], cwd: Path, output) -> subprocess.Popen:
    """``words`` run in ``cwd``, in a process group of its own (``kill_group`` ends it)."""
    return subprocess.Popen(
        words, cwd=cwd, stdout=output, stderr=output, text=True, start_new_session=True
    )


@pytest.mark.slow
def test_a_worker_killed_mid_sweep_on_a_cluster_started_as_the_docs_say(tmp_path):
    """The documentation's recipe as written (``_recipe``), the sweep slowed and into a store
    of its own; one worker (its nanny and its process) killed mid-sweep."""
    background, command = _recipe()
    address = next(word.split("=", 1)[1] for word in command if "cluster.address=" in word)
    store = tmp_path / "r.zarr"
    started = []
    try:
        for words in background:  # each in a group of its own: a worker with its nanny
            started.append(_started(words, tmp_path, subprocess.DEVNULL))
        sweeping = _started([*command, f"store={store}", *SLOW], tmp_path, subprocess.PIPE)
        started.append(sweeping)
        wait_for(lambda: done_count(store) >= 4, 180, "the first finished cells")
        kill_group(started[1])  # w0
        _, err = sweeping.communicate(timeout=240)
        assert sweeping.returncode == 0, err
        ds = xr.open_zarr(store)
        assert int(ds.done.sum()) == TOTAL and not bool(ds.failed.any())
        with Client(address, timeout=30) as client:
            assert [w["name"] for w in client.scheduler_info()["workers"].values()] == ["w1"]
    finally:
        for process in started:
            kill_group(process)


def test_a_killed_sweep_resumes_to_the_uninterrupted_result(client, tmp_path, caplog):
    """The sweep killed from outside with its workers, then resumed (in this process, on the
    shared cluster): the cells it finished are kept, the others computed, the values those
    of a sweep never interrupted."""
    whole = ["experiment=smoke", *SLOW[1:], f"store={tmp_path / 'w.zarr'}"]
    expected = run(whole, client=client).load()

    interrupted = start_sweep(*TINY, *SLOW, "store=resumed.zarr", cwd=tmp_path)
    store = tmp_path / "resumed.zarr"
    wait_for(lambda: done_count(store) >= 6, 120, "the first finished cells")
    kill_group(interrupted)
    survived = done_count(store)
    assert 6 <= survived < TOTAL and interrupted.poll() is not None

    caplog.set_level(logging.INFO, logger="pipeline.sweep")
    run(["experiment=smoke", *SLOW, f"store={store}"], client=client)
    computed, already = map(
        int, re.search(r"(\d+) cells to compute, (\d+) already done", caplog.text).groups()
    )
    assert already == survived and computed == TOTAL - survived

    resumed = xr.open_zarr(store).load()
    assert set(resumed.data_vars) == set(expected.data_vars)
    assert_same_values(resumed, expected)
    for name in MEASURED:
        assert bool(np.isfinite(resumed[name].where(resumed.in_grid, 0)).all()), name


def test_two_sweeps_started_together_on_one_store(tmp_path):
    """One runs; the other stops at once with the lock line; the store ends sound and whole."""
    # the first still runs when the second starts: 48 cells, 8 timings of 0.5 s
    slow = ["timing.min_seconds=0.5", "timing.max_repeats=1000"]
    slow += ["grid.families=[bell]", "grid.n_states=[20]"]
    runs = [start_sweep(*TINY, *slow, "store=shared.zarr", cwd=tmp_path) for _ in range(2)]
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
    assert done_count(store) == 48 and not damage(store)


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
