import numpy as np
import pytest
import xarray as xr
import zarr

from pipeline.results.methods import DIMS, SCHEMA, VARIABLES
from pipeline.sweep.config import ConfigError
from pipeline.sweep.kinds.methods.grid import MethodsGrid
from pipeline.sweep.store import ResultStore

from helpers import composed


@pytest.fixture
def grid():
    """Not a product: methods with different settings, families with different sizes."""
    return MethodsGrid.from_config(
        composed(
            "grid.n_states={bell:[20,40],uniform:[20],dirichlet:[40]}",
            "grid.methods={topp:[0.5,0.9],topk:[3]}",
        )
    )


def fake_values(cell, grid):
    """Values that reveal their cell, so a mislabelled write is caught.

    A variable without some of the cell's dims gets the same value from every
    cell that shares the dims it has.
    """
    code = dict(zip(DIMS, grid.index(cell), strict=True))
    values = {}
    for name, variable in VARIABLES.items():
        if variable.dtype != "float64":
            continue
        kept = [code[d] for d in DIMS if d in variable.dims]
        value = float(sum(i * 10**k for k, i in enumerate(kept)))
        values[name] = np.full(grid.horizon + 1, value) if "t" in variable.dims else value
    return values


def test_round_trip_with_plain_xarray(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, SCHEMA, grid, {"note": "test"})
    cells = grid.cells()
    for cell in cells[:-1]:
        store.record(cell, fake_values(cell, grid))
    store.record_failure(cells[-1], "ValueError: boom")
    store.flush()
    ds = xr.open_zarr(path)
    assert dict(ds.sizes) == {
        "family": 3,
        "n_states": 2,
        "method": 2,
        "setting": 3,
        "seed": 2,
        "mode": 2,
        "t": 11,
    }
    for name in [*VARIABLES, "in_grid"]:
        assert ds[name].attrs["units"] and ds[name].attrs["long_name"], name
    assert "filter mode" in ds["certificate"].attrs["missing"]
    assert int(ds.done.sum()) == len(cells) - 1 and int(ds.failed.sum()) == 1
    assert int(ds.in_grid.sum()) * 2 * 2 == len(cells)
    assert ds.attrs["note"] == "test" and "grid" in ds.attrs and ds.attrs["format"] == 2
    for cell in cells[:-1]:
        selected = ds.sel(cell._asdict())
        expected = fake_values(cell, grid)
        assert float(selected.tv.isel(t=3)) == expected["tv"][3]
        assert float(selected.gamma) == expected["gamma"]
        assert float(selected.sparsity) == expected["sparsity"]
        assert float(selected.bound.isel(t=0)) == expected["bound"][0]
    failed = ds.sel(cells[-1]._asdict())
    assert str(failed.error.values) == "ValueError: boom" and not bool(failed.done)
    one = ds.tv.where(ds.in_grid).sel({"method": "topk", "setting": 3.0})
    assert bool(one.sel(family="bell", n_states=40).notnull().all())
    assert bool(one.sel(family="uniform", n_states=40).isnull().all())


def test_resume_reads_back_and_skips_done_cells(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, SCHEMA, grid, {})
    first = grid.cells()[:7]
    for cell in first:
        store.record(cell, fake_values(cell, grid))
    store.flush()
    resumed = ResultStore.open(path, SCHEMA, grid, {})
    assert resumed.n_done == 7
    todo = resumed.todo()
    assert len(todo) == len(grid.cells()) - 7 and not set(todo) & set(first)
    assert xr.open_zarr(path).attrs["runs"] == 2


def test_unflushed_records_are_not_in_the_store(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, SCHEMA, grid, {})
    store.record(grid.cells()[0], fake_values(grid.cells()[0], grid))
    assert int(xr.open_zarr(path).done.sum()) == 0
    assert ResultStore.open(path, SCHEMA, grid, {}).n_done == 0


def test_a_different_grid_is_refused_or_replaced(tmp_path, grid):
    path = tmp_path / "r.zarr"
    ResultStore.open(path, SCHEMA, grid, {})
    other = MethodsGrid.from_config(composed("grid.methods={topp:[0.5,0.7]}"))
    with pytest.raises(ConfigError, match=r"store: .* holds a different sweep: methods is "):
        ResultStore.check(path, SCHEMA, other)
    assert not ResultStore.check(path, SCHEMA, other, overwrite=True)
    replaced = ResultStore.open(path, SCHEMA, other, {}, overwrite=True)
    assert replaced.n_done == 0
    assert xr.open_zarr(path).setting.values.tolist() == [0.5, 0.7]


def test_something_else_at_the_path_is_refused(tmp_path, grid):
    (tmp_path / "not_a_store").mkdir()
    with pytest.raises(ConfigError, match="not a results store"):
        ResultStore.check(tmp_path / "not_a_store", SCHEMA, grid)


def test_a_store_of_the_old_layout_is_refused_never_misread(tmp_path, grid):
    path = tmp_path / "old.zarr"
    ResultStore.open(path, SCHEMA, grid, {})
    group = zarr.open_group(path, mode="r+", use_consolidated=False)
    del group.attrs["format"]  # what every store written before the methods layer lacks
    with pytest.raises(ConfigError, match=r"old.zarr has layout 1, this pipeline reads layout 2"):
        ResultStore.check(path, SCHEMA, grid)
    assert not ResultStore.check(path, SCHEMA, grid, overwrite=True)
