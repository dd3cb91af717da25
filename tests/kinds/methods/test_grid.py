import numpy as np
import pytest

from pipeline.kinds.methods.grid import Cell, MethodsGrid
from pipeline.kinds.methods.results import DIMS

from sweeping import composed

IN_GRID = ("family", "n_states", "method", "setting")


def test_full_product():
    grid = MethodsGrid.from_config(composed("grid.methods={topp:[0.5,0.9]}"))
    assert grid.in_grid(IN_GRID).all()
    cells = grid.cells()
    assert len(cells) == 3 * 2 * 2 * 2 * 4  # families, sizes, settings, seeds, modes
    assert len(set(cells)) == len(cells)
    coords = grid.coords()
    assert list(coords) == [*DIMS, "t"]
    assert coords["t"].tolist() == list(range(11))
    assert MethodsGrid.Cell._fields == DIMS
    dtypes = {dim: coords[dim].dtype.str for dim in coords}
    assert dtypes == {
        "family": "|O",
        "n_states": "<i8",
        "method": "|O",
        "setting": "<f8",
        "seed": "<i8",
        "mode": "|O",
        "t": "<i8",
    }
    for cell in cells:
        index = grid.index(cell)
        assert tuple(coords[d][i] for d, i in zip(DIMS, index, strict=True)) == tuple(cell)


def test_sizes_per_family_and_settings_per_method_are_not_a_product():
    grid = MethodsGrid.from_config(
        composed(
            "grid.families=[bell,lm]",
            "grid.n_states={bell:[20,40],lm:[30]}",
            "grid.methods={topp:[0.5,0.9],topk:[5]}",
        )
    )
    assert grid.n_states == (20, 30, 40) and grid.setting == (0.5, 0.9, 5.0)
    assert grid.methods == ("topp", "topk")
    in_grid = grid.in_grid(IN_GRID)
    np.testing.assert_array_equal(in_grid[:, :, 0, 0], [[True, False, True], [False, True, False]])
    np.testing.assert_array_equal(in_grid[0, 0], [[True, True, False], [False, False, True]])
    np.testing.assert_array_equal(grid.in_grid(("n_states",)), [True, True, True])
    cells = grid.cells()
    assert {c.n_states for c in cells if c.family == "lm"} == {30}
    assert {(c.method, c.setting) for c in cells} == {("topp", 0.5), ("topp", 0.9), ("topk", 5.0)}
    assert len(cells) == 3 * 3 * 2 * 4


def test_fingerprint_tracks_values_that_change_results():
    base = MethodsGrid.from_config(composed()).fingerprint()
    assert MethodsGrid.from_config(composed()).fingerprint() == base
    assert MethodsGrid.from_config(composed("grid.horizon=11")).fingerprint() != base
    assert MethodsGrid.from_config(composed("model.dirichlet.alpha=0.5")).fingerprint() != base
    assert MethodsGrid.from_config(composed("timing.repeats=5")).fingerprint() == base
    one = composed("grid.methods={topp:[0.5],topk:[2]}")
    other = composed("grid.methods={topk:[2],topp:[0.5]}")
    # The order of the methods is the order of the coordinate: it must tell the stores apart.
    assert (
        MethodsGrid.from_config(one).fingerprint() != MethodsGrid.from_config(other).fingerprint()
    )


def test_a_cell_outside_the_grid_has_no_index():
    with pytest.raises(ValueError):
        MethodsGrid.from_config(composed()).index(Cell("bell", 21, "topp", 0.5, 0, "predict"))
