import numpy as np
import scipy.sparse as sp

from pipeline import operators
from pipeline.kernels import maxproduct
from pipeline.operators import SparsePlusRankOne


def test_a_structured_step_walks_past_the_rows_it_scans_one_by_one():
    """Column 0 is stored by the 30 rows of largest ``weights * u`` (more than
    ``WALKED_ROWS``): its best row off the pattern is the 31st in that order, found once the
    step sorts the rows; column 1 by none, column 2 by all rows (none off its pattern)."""
    n = 40
    rows = np.r_[np.arange(30), np.arange(n)]
    columns = np.r_[np.zeros(30, int), np.full(n, 2)]
    S = sp.csr_array((np.full(rows.size, 0.01), (rows, columns)), shape=(n, 3))
    u = np.linspace(1.0, 0.5, n) / 3  # the rows in order of u: 0, 1, 2, ...
    M = SparsePlusRankOne(S, u, np.ones(3))
    assert maxproduct.WALKED_ROWS < 30
    weights = np.ones(n)
    found = operators.max_product(M, weights)
    products = weights[:, None] * M.toarray()
    np.testing.assert_array_equal(found.states, products.argmax(axis=0))
    np.testing.assert_allclose(found.values, products.max(axis=0), rtol=1e-15)
    weights[:30] = 0.0  # now the 31st row is the best in every column
    found = operators.max_product(M, weights)
    np.testing.assert_array_equal(found.states, [30, 30, 30])


def test_backtrack_follows_the_pointers_and_hands_on_the_state_before():
    back = np.array([[2, 0, 0], [2, 0, 1], [1, 2, 0]], dtype=np.uint8)
    path = np.empty(3, np.int64)
    before = maxproduct.backtrack(back, 0, path)
    np.testing.assert_array_equal(path, [0, 1, 0])
    assert before == 2
