import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from pipeline.config import REPOSITORY, register
from pipeline.grid import DIMS, Cell, Grid
from pipeline.sweep import replaceable


def composed(*overrides):
    register()
    with initialize_config_dir(config_dir=str(REPOSITORY / "conf"), version_base="1.3"):
        return compose("config", overrides=replaceable(["experiment=smoke", *overrides]))


def test_full_product():
    grid = Grid.from_config(composed())
    assert grid.is_product
    cells = grid.cells()
    assert len(cells) == 3 * 2 * 2 * 2 * 2
    assert len(set(cells)) == len(cells)
    coords = grid.coords()
    assert list(coords) == [*DIMS, "t"]
    assert coords["t"].tolist() == list(range(11))
    for cell in cells:
        index = grid.index(cell)
        assert tuple(coords[d][i] for d, i in zip(DIMS, index, strict=True)) == tuple(cell)


def test_sizes_per_family_are_not_a_product():
    grid = Grid.from_config(
        composed("grid.families=[bell,lm]", "grid.n_states={bell:[20,40],lm:[30]}")
    )
    assert grid.n_states == (20, 30, 40)
    np.testing.assert_array_equal(grid.in_grid, [[True, False, True], [False, True, False]])
    assert not grid.is_product
    assert {c.n_states for c in grid.cells() if c.family == "lm"} == {30}


def test_fingerprint_tracks_values_that_change_results():
    base = Grid.from_config(composed()).fingerprint()
    assert Grid.from_config(composed()).fingerprint() == base
    assert Grid.from_config(composed("grid.horizon=11")).fingerprint() != base
    assert Grid.from_config(composed("model.dirichlet.alpha=0.5")).fingerprint() != base
    assert Grid.from_config(composed("timing.repeats=5")).fingerprint() == base


def test_cells_are_named_tuples():
    cell = Cell("bell", 20, 0.5, 0, "predict")
    assert cell._fields == DIMS
    with pytest.raises(ValueError):
        Grid.from_config(composed()).index(Cell("bell", 21, 0.5, 0, "predict"))
