"""A store is replaced atomically: the process killed at every named step of creating,
growing or replacing a store (``PIPELINE_KILL_AT``), then the same command run again, ends
in the store an uninterrupted run makes, bit for bit; whatever a kill left beside the store
is put back or proved redundant, never lost, and no message on the way advises
``overwrite=true``."""

import functools
import logging
import multiprocessing
import os
import shutil
import signal
import subprocess

import numpy as np
import pytest
import xarray as xr

from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import MEASURED, SCHEMA
from pipeline.results import Found, damage, found
from pipeline.sweep import run
from pipeline.sweep.config import ConfigError
from pipeline.sweep.replace import KILL_AT, POINTS, beside, recover
from pipeline.sweep.store import ResultStore

from sweeping import TINY, composed, done_count, kill_group, start_sweep

SMALL = ("grid.families=[bell]", "grid.methods={topp:[0.5,0.9]}", "grid.seeds=[0]")
GROWN = ("grid.families=[bell]", "grid.methods={topp:[0.5,0.9,0.95]}", "grid.seeds=[0,1]")
OTHER = ("grid.families=[uniform]", "grid.methods={topk:[3]}", "grid.seeds=[0]")


@functools.cache
def _grid(overrides) -> MethodsGrid:
    """The grid of ``overrides``, composed once (a grid is immutable)."""
    return MethodsGrid.from_config(composed(*overrides))


def _command(path, grid: MethodsGrid, overwrite: bool = False) -> int:
    """What a sweep does with its store: open it (create, grow, replace or resume), compute
    the cells not done (values that reveal their cell, the same in every grid), flush; how
    many cells it computed."""
    store = ResultStore.open(path, SCHEMA, grid, {}, overwrite=overwrite)
    todo = store.todo()
    for cell in todo:
        code = float(abs(hash(tuple(cell))) % 10**6)
        store.record(cell, {"tv": np.full(grid.horizon + 1, code), "gamma": code})
    store.flush()
    return len(todo)


def _killed_at(point: str, path, grid: MethodsGrid, overwrite: bool = False) -> int:
    """``_command`` in a forked process that kills itself at ``point``; its exit code."""

    def killed() -> None:
        os.environ[KILL_AT] = point
        _command(path, grid, overwrite)

    child = multiprocessing.get_context("fork").Process(target=killed)
    child.start()
    child.join(120)
    return child.exitcode


CASES = {
    # case: (what is at the path before, the command's grid, overwrite, the steps it takes,
    # the cells it computes: a grown store's first 16 are kept)
    "create": (None, SMALL, False, ("written", "synced", "in_place"), 16),
    "grow": (SMALL, GROWN, False, POINTS, 48 - 16),
    "overwrite": (OTHER, SMALL, True, ("aside", "in_place"), 16),  # the old store discarded
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> dict:
    """A finished store of each grid, and the store each case's command makes uninterrupted."""
    root = tmp_path_factory.mktemp("replace")
    stores = {}
    for name, overrides in {"SMALL": SMALL, "OTHER": OTHER}.items():
        stores[overrides] = root / f"{name}.zarr"
        _command(stores[overrides], _grid(overrides))
    for case, (before, overrides, overwrite, _, computed) in CASES.items():
        stores[case] = root / f"{case}.zarr"
        if before is not None:
            shutil.copytree(stores[before], stores[case])
        assert _command(stores[case], _grid(overrides), overwrite) == computed
    return stores


@pytest.mark.parametrize(
    ("case", "point"), [(c, p) for c, (*_, points, _) in CASES.items() for p in points]
)
def test_a_kill_at_every_step_then_the_same_command_ends_in_the_uninterrupted_store(
    finished, tmp_path, case, point
):
    before, overrides, overwrite, _, computed = CASES[case]
    path = tmp_path / "r.zarr"
    if before is not None:
        shutil.copytree(finished[before], path)
    assert _killed_at(point, path, _grid(overrides), overwrite) == -signal.SIGKILL
    left = sorted(p.name for p in tmp_path.iterdir())
    if (case, point) != ("create", "in_place"):  # the kill left a folder beside the path
        assert any(name.startswith(".r.zarr.") for name in left), left
    if before is not None:  # a whole store is at the path or aside: the old one or the new
        whole = path if path.exists() else next(tmp_path.glob(".r.zarr.*.replaced"), None)
        whole = whole or next(tmp_path.glob(".r.zarr.*.discarded"))
        assert found(whole) is Found.RESULTS and not damage(whole)
    assert _command(path, _grid(overrides), overwrite) == computed  # the kept cells kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.zarr"]
    clean, repaired = xr.open_zarr(finished[case]).load(), xr.open_zarr(path).load()
    xr.testing.assert_identical(repaired.drop_attrs(), clean.drop_attrs())
    assert not damage(path)


def test_a_store_left_aside_is_put_back_and_never_replaced_by_the_advice(finished, tmp_path):
    """The issue's sequence: a finished store grown, the sweep killed with the old store
    aside; every command the tool then suggests keeps its cells."""
    path = tmp_path / "r.zarr"
    shutil.copytree(finished[SMALL], path)
    assert _killed_at("aside", path, _grid(GROWN)) == -signal.SIGKILL
    assert not path.exists() and len(list(tmp_path.glob(".r.zarr.*.replaced"))) == 1
    with pytest.raises(ConfigError, match="overwrite=true never deletes them"):
        _command(path, _grid(GROWN), overwrite=True)  # the store is put back first: its
    assert path.exists()  # cells are this run's to keep
    assert _command(path, _grid(GROWN)) == 48 - 16
    grown = xr.open_zarr(path).load()
    old = xr.open_zarr(finished[SMALL]).load()
    np.testing.assert_array_equal(grown.tv.sel(setting=[0.5, 0.9], seed=[0]), old.tv)
    assert int(grown.done.sum()) == int(xr.open_zarr(finished["grow"]).done.sum())


def test_a_folder_holding_cells_the_store_lacks_is_kept_and_named(finished, tmp_path):
    path = tmp_path / "r.zarr"
    shutil.copytree(finished[SMALL], path)
    aside = beside(path, "replaced", _ended_pid())  # a PID no process has now
    shutil.copytree(finished["grow"], aside)  # more cells than the store at the path
    with pytest.raises(ConfigError) as refused:
        _command(path, _grid(SMALL))
    assert str(refused.value) == (
        f"store: {aside} holds 48 finished cells, not proved to be in {path} (a sweep was "
        f"killed while replacing it): to keep them, rename {path} aside and {aside.name} to "
        f"r.zarr; to drop them, remove {aside.name}; then run the same command"
    )
    assert found(aside) is Found.RESULTS and not damage(aside)


def test_under_the_lock_a_store_aside_is_put_back_whatever_runs_under_its_pid(finished, tmp_path):
    """A PID reused by a live process does not hide the store a killed sweep put aside."""
    path = tmp_path / "r.zarr"
    with subprocess.Popen(["sleep", "60"]) as reused:
        aside = beside(path, "replaced", reused.pid)
        shutil.copytree(finished[SMALL], aside)
        try:
            recover(path)  # without the lock: it may be that process's, left alone
            assert not path.exists() and aside.exists()
            recover(path, locked=True)  # the sweep holds the lock: no process replaces it
            assert found(path) is Found.RESULTS and not aside.exists()
        finally:
            reused.kill()


def test_links_are_never_followed(finished, tmp_path):
    target = tmp_path / "elsewhere.zarr"
    shutil.copytree(finished[SMALL], target)
    path = tmp_path / "r.zarr"
    path.symlink_to(target)
    with pytest.raises(ConfigError) as refused:
        ResultStore.check(path, SCHEMA, _grid(SMALL))
    assert str(refused.value) == (
        f"store: {path} is a symbolic link (to {target}): a store is put in place by renames, "
        f"which would replace the link; give store={target}"
    )
    path.unlink()
    beside(path, "replaced", _ended_pid()).symlink_to(target)  # named like a leftover
    recover(path, locked=True)
    assert found(target) is Found.RESULTS and not damage(target)  # its target untouched


def _ended_pid() -> int:
    with subprocess.Popen(["true"]) as ended:
        ended.wait()
    return ended.pid


def test_a_sweep_killed_while_its_grown_store_replaces_the_old_one_resumes(
    smoke, client, tmp_path, caplog
):
    """The command line, killed by the fault point with the old store aside and the grown one
    not yet in place, then run again (in this process, on the shared cluster): every
    finished cell kept, to its own clocks."""
    store = tmp_path / "s.zarr"
    shutil.copytree(smoke[0], store)
    grown = [*TINY, f"store={store}", "grid.methods.topp=[0.5,0.9,0.95]"]
    killed = start_sweep(*grown, cwd=tmp_path, env={**os.environ, KILL_AT: "aside"})
    _, err = killed.communicate(timeout=240)
    kill_group(killed)  # its workers, orphaned
    assert killed.returncode == -signal.SIGKILL, err
    assert not store.exists() and done_count(next(tmp_path.glob(".s.zarr.*.replaced"))) == 288
    caplog.set_level(logging.INFO, logger="pipeline.sweep")
    run(grown, client=client)
    assert "overwrite" not in caplog.text and "put back from .s.zarr." in caplog.text
    old, new = xr.open_zarr(smoke[0]).load(), xr.open_zarr(store).load()
    assert int(new.done.sum()) == 288 + 48
    for name in SCHEMA.variables:  # a model's clocks are read again by its new cells
        if name in MEASURED and "setting" not in old[name].dims:
            continue
        kept = new[name].sel({d: old[d] for d in old[name].dims})
        xr.testing.assert_identical(kept.drop_attrs(), old[name].drop_attrs())
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".s.zarr")) == []
