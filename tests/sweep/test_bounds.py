"""Runaway grids are refused before anything starts: too many cells, a store too large for
the machine's memory or its disk, numbers the store's integers cannot hold, a model file
too large for the workers; each in one line, within seconds, nothing written."""

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.kinds.methods import results
from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.models import file as file_family
from pipeline.sweep.bounds import check_bounds, check_room, store_bytes
from pipeline.sweep.config import ConfigError, compose, register
from pipeline.sweep.engine import prepare
from pipeline.sweep.main import check_overrides


def _refusal(*overrides: str, store: Path) -> str:
    register()
    problem = check_overrides(["experiment=smoke", f"store={store}", *overrides])
    assert problem is not None and "\n" not in problem
    assert not store.exists()
    return problem


def test_a_horizon_of_a_billion_steps_is_refused_from_the_store_size(tmp_path):
    started = time.process_time()  # this process's CPU: a loaded machine does not count
    problem = _refusal("methods.grid.horizon=1000000000", store=tmp_path / "s.zarr")
    assert time.process_time() - started < 10
    assert problem.startswith("grid: the store would hold 60,796.7 GiB (")
    assert "t 1,000,000,001" in problem and "of this machine's memory" in problem


def test_a_million_cells_are_refused_within_seconds(tmp_path):
    cfg, _ = compose(["experiment=smoke"])
    cfg.methods.grid.seeds = list(range(7_000))  # 144 cells a seed
    started = time.process_time()  # this process's CPU: a loaded machine does not count
    with pytest.raises(ConfigError, match=r"^max_cells: the grid has 1,008,000 cells, more "):
        prepare(cfg, tmp_path / "s.zarr")
    assert time.process_time() - started < 10
    grid = MethodsGrid.from_config(cfg)  # a grid meant to be that large, and a store it fits:
    check_bounds(results.SCHEMA, grid, max_cells=2_000_000)


def test_a_seed_past_the_stores_integers_is_refused(tmp_path):
    problem = _refusal("methods.grid.seeds=[100000000000000000000000]", store=tmp_path / "s.zarr")
    assert problem == (
        "methods.grid.seeds: 100000000000000000000000 does not fit the store's 64-bit integers; "
        "allowed: integers >= 0"
    )


def test_the_store_size_counts_every_variable_over_its_dims():
    cfg, _ = compose(["experiment=smoke"])
    grid = MethodsGrid.from_config(cfg)
    lengths = grid.dim_lengths()
    assert lengths["t"] == 11 and lengths["family"] == 3
    opened = {
        name: np.zeros(
            [lengths[d] for d in variable.dims],
            dtype=object if variable.dtype == "str" else variable.dtype,
        )
        for name, variable in results.SCHEMA.variables.items()
    }
    assert store_bytes(results.SCHEMA, grid) == sum(
        a.size * (8 if a.dtype == object else a.itemsize) for a in opened.values()
    )


def test_a_store_larger_than_its_disk_is_refused(tmp_path):
    """The free space of the store's nearest existing folder bounds the store: a horizon whose
    store would take twice the disk's free space is refused, one that fits passes."""
    per_step = store_bytes(results.SCHEMA, _grid("methods.grid.horizon=11")) - store_bytes(
        results.SCHEMA, _grid("methods.grid.horizon=10")
    )
    free = shutil.disk_usage(tmp_path).free
    store = tmp_path / "a" / "b" / "s.zarr"
    check_room(results.SCHEMA, _grid("methods.grid.horizon=10"), store)
    with pytest.raises(ConfigError, match=r"^store: .*s\.zarr would take up to .* free; allowed"):
        check_room(results.SCHEMA, _grid(f"methods.grid.horizon={2 * free // per_step}"), store)


def _grid(*overrides: str) -> MethodsGrid:
    return MethodsGrid.from_config(compose(["experiment=smoke", *overrides])[0])


def test_a_file_model_too_large_for_the_workers_is_refused_from_its_headers(tmp_path):
    """A 2000-state dense model (96 MB of the transition with its layout, 32 MB of the
    emission...) is estimated from its archive's headers, before it is read, against a
    worker of 0.5 GiB."""
    n = 2000
    path = tmp_path / "big.npz"
    transition = np.full((n, n), 1 / n)
    file_family.save(path, np.full(n, 1 / n), transition, np.full((n, 2), 0.5))
    assert file_family.model_bytes(path=str(path)) == 2 * 8 * n * n + 8 * n * 2 + 8 * n
    register()
    problem = check_overrides(
        [
            "experiment=file",
            f"methods.model.file.path={path}",
            f"store={tmp_path / 's.zarr'}",
            "cluster.memory_limit=0.45GiB",
            "cluster.n_workers=1",
        ]
    )
    assert problem.startswith("methods.grid.n_states: the cell family=file, n_states=2000"), problem
    assert "more than a worker's 0.45 GiB" in problem
