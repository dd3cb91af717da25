"""A store grows: a rerun whose grid holds every stored cell and more computes only the new
cells and ends equal, bit for bit on every value variable, to a fresh run of the larger grid;
a grid that changes what a stored cell means is refused in one line naming the key."""

import numpy as np
import pytest
import xarray as xr

from pipeline.kinds.methods.results import MEASURED
from pipeline.sweep import run
from pipeline.sweep.config import register
from pipeline.sweep.main import check_overrides

from helpers import assert_same_values

SMALL = ["experiment=smoke", "grid.families=[bell]", "grid.n_states=[20]", "grid.seeds=[0]"]
LARGER = [*SMALL, "grid.methods={topp:[0.5,0.9,0.95]}", "grid.seeds=[0,1,2]"]


@pytest.fixture(scope="module")
def fresh(client, tmp_path_factory):
    """A store of the larger grid swept at once, never grown: its path (the tests only read
    it)."""
    store = tmp_path_factory.mktemp("grow") / "fresh.zarr"
    run([*LARGER, f"store={store}"], client=client)
    return store


def test_more_settings_and_seeds_compute_only_the_new_cells(fresh, client, tmp_path):
    store = f"store={tmp_path / 'grown.zarr'}"
    first = run([*SMALL, store, "grid.methods={topp:[0.5,0.9]}"], client=client).load()
    grown = run([*LARGER, store], client=client).load()
    assert grown.setting.values.tolist() == [0.5, 0.9, 0.95] and grown.sizes["seed"] == 3
    assert bool(grown.done.where(grown.in_grid, True).all()) and int(grown.done.sum()) == 36
    assert_same_values(grown, xr.open_zarr(fresh).load())
    # the first run's cells were kept, not computed again: even their clocks are the same
    # (a model's own, such as its build time, is measured again by its new cells)
    old = {"setting": [0.5, 0.9], "seed": [0]}
    for name in sorted(MEASURED & set(first.data_vars)):
        if "setting" in first[name].dims:
            got = grown[name].sel(old).values
            np.testing.assert_array_equal(got, first[name].values, name)
    assert len(grown.attrs["runs"]) == 2


def test_a_grid_that_changes_a_stored_cells_meaning_is_refused_naming_the_key(fresh):
    store = f"store={fresh}"
    register()
    for override, difference in (
        ("grid.horizon=11", "horizon is 10 in the store but 11 in this run"),
        ("model.bell.structured=true", "model is "),
        ("grid.families=[uniform]", "families is ['bell'] in the store but ['uniform']"),
    ):
        problem = check_overrides([*LARGER, store, override])
        assert problem.startswith("store: ") and difference in problem, problem
