import numpy as np
import pytest
import xarray as xr
from test_grid import composed

from pipeline.config import ConfigError
from pipeline.grid import Grid
from pipeline.store import VARIABLES, ResultStore


@pytest.fixture
def grid():
    return Grid.from_config(composed())


def fake_values(cell, grid):
    """Values that reveal their cell, so a mislabelled write is caught."""
    code = grid.index(cell)
    tag = float(sum(i * 10**k for k, i in enumerate(code)))
    values = {
        name: np.full(grid.horizon + 1, tag) if "t" in v.dims else tag
        for name, v in VARIABLES.items()
        if v.dtype == "float64"
    }
    # Variables without some cell dims hold the same value for every cell sharing them.
    for name, variable in VARIABLES.items():
        if variable.dtype == "float64":
            kept = [
                i
                for d, i in zip(("family", "n_states", "p", "seed", "mode"), code, strict=True)
                if d in variable.dims
            ]
            value = float(sum(i * 10**k for k, i in enumerate(kept)))
            values[name] = np.full(grid.horizon + 1, value) if "t" in variable.dims else value
    return values


def test_round_trip_with_plain_xarray(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, grid, {"note": "test"})
    cells = grid.cells()
    for cell in cells[:5]:
        store.record(cell, fake_values(cell, grid))
    store.record_failure(cells[5], "ValueError: boom")
    store.flush()
    ds = xr.open_zarr(path)
    assert dict(ds.sizes) == {"family": 3, "n_states": 2, "p": 2, "seed": 2, "mode": 2, "t": 11}
    for name in [*VARIABLES, "bound_linear", "bound_single_step"]:
        assert ds[name].attrs["units"] and ds[name].attrs["long_name"], name
    assert int(ds.done.sum()) == 5 and int(ds.failed.sum()) == 1
    assert ds.attrs["note"] == "test" and "grid" in ds.attrs
    for cell in cells[:5]:
        selected = ds.sel(cell._asdict())
        expected = fake_values(cell, grid)
        assert float(selected.tv.isel(t=3)) == expected["tv"][3]
        assert float(selected.gamma) == expected["gamma"]
        assert float(selected.sparsity) == expected["sparsity"]
    failed = ds.sel(cells[5]._asdict())
    assert str(failed.error.values) == "ValueError: boom" and not bool(failed.done)
    np.testing.assert_allclose(ds.bound_linear.sel(p=0.5), 0.5 * np.arange(1, 12))


def test_resume_reads_back_and_skips_done_cells(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, grid, {})
    first = grid.cells()[:7]
    for cell in first:
        store.record(cell, fake_values(cell, grid))
    store.flush()
    resumed = ResultStore.open(path, grid, {})
    assert resumed.n_done == 7
    todo = resumed.todo()
    assert len(todo) == len(grid.cells()) - 7 and not set(todo) & set(first)
    assert xr.open_zarr(path).attrs["runs"] == 2


def test_unflushed_records_are_not_in_the_store(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, grid, {})
    store.record(grid.cells()[0], fake_values(grid.cells()[0], grid))
    assert int(xr.open_zarr(path).done.sum()) == 0
    assert ResultStore.open(path, grid, {}).n_done == 0


def test_a_different_grid_is_refused_or_replaced(tmp_path, grid):
    path = tmp_path / "r.zarr"
    ResultStore.open(path, grid, {})
    other = Grid.from_config(composed("grid.p=[0.5,0.7]"))
    with pytest.raises(
        ConfigError,
        match=r"store: .* holds a different sweep: p is \[0.5, 0.9\] "
        r"in the store but \[0.5, 0.7\] in this run",
    ):
        ResultStore.check(path, other)
    assert not ResultStore.check(path, other, overwrite=True)
    replaced = ResultStore.open(path, other, {}, overwrite=True)
    assert replaced.n_done == 0
    assert xr.open_zarr(path).p.values.tolist() == [0.5, 0.7]


def test_something_else_at_the_path_is_refused(tmp_path, grid):
    (tmp_path / "not_a_store").mkdir()
    with pytest.raises(ConfigError, match="not a results store"):
        ResultStore.check(tmp_path / "not_a_store", grid)
