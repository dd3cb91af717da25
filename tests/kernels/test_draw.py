import numpy as np

from pipeline.kernels import draw


def test_search_finds_the_first_entry_above_the_target_and_never_a_zero_one():
    """Row 0: masses 0.25, 0 (stored), 0.75, 0 (stored, last); row 1 empty of mass but
    one entry. A target at or past the row's total (rounding) lands on its last entry of
    non-zero mass."""
    indptr = np.array([0, 4, 5])
    data = np.array([0.25, 0.0, 0.75, 0.0, 1.0])
    cumulative = draw.row_cumsums(indptr, data)
    np.testing.assert_array_equal(cumulative, [0.25, 0.25, 1.0, 1.0, 1.0])
    rows = np.array([0, 0, 0, 0, 1])
    targets = np.array([0.0, 0.25, 0.999, 1.0, 0.5])
    out = np.empty(5, np.int64)
    draw.search(indptr, cumulative, rows, targets, out)
    np.testing.assert_array_equal(out, [0, 2, 2, 2, 4])


def test_stored_tells_whether_a_row_holds_a_column():
    indptr, indices = np.array([0, 2, 2, 5]), np.array([1, 4, 0, 2, 3])
    rows, columns = np.array([0, 0, 1, 2, 2]), np.array([4, 2, 0, 3, 1])
    out = np.empty(5, np.bool_)
    draw.stored(indptr, indices, rows, columns, out)
    np.testing.assert_array_equal(out, [True, False, False, True, False])
