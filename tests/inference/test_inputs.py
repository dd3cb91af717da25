import numpy as np
import pytest

from pipeline.inference.inputs import SCALE_RANGE, read_evidence, read_initial
from pipeline.testing.random_models import random_hmm


def test_rows_far_from_one_are_scaled_by_exact_powers_of_two():
    """Rows within ``SCALE_RANGE`` are read as given (the forward recursion's numbers do not
    change); others are divided by a power of two, exactly, subnormal entries included."""
    hmm = random_hmm(1, 3, 2)
    given = np.array(
        [[0.5, 0.25, 1.0], [1e-322, 5e-324, 0.0], [3e100, 1e300, 2.0], [2.0**-SCALE_RANGE] * 3]
    )
    evidence = read_evidence(hmm, None, given, None)
    np.testing.assert_array_equal(evidence.likelihoods[[0, 3]], given[[0, 3]])
    assert evidence.log_scale[0] == evidence.log_scale[3] == 0.0
    for row in (1, 2):
        power = np.round(evidence.log_scale[row] / np.log(2)).astype(int)
        np.testing.assert_array_equal(np.ldexp(evidence.likelihoods[row], power), given[row])
        assert 0.5 <= evidence.likelihoods[row].max() < 1
    np.testing.assert_array_equal(evidence.rows, np.arange(4))


def test_log_likelihoods_are_divided_by_their_largest_entry():
    hmm = random_hmm(1, 3, 2)
    logs = np.array([[-1000.0, -1001.0, -np.inf], [-np.inf] * 3])
    evidence = read_evidence(hmm, None, None, logs)
    np.testing.assert_allclose(evidence.likelihoods[0], [1.0, np.exp(-1.0), 0.0])
    np.testing.assert_array_equal(evidence.likelihoods[1], 0.0)  # zero evidence at that step
    np.testing.assert_array_equal(evidence.log_scale, [-1000.0, 0.0])
    counted = evidence.offsets(np.array([False, True]))
    assert counted == -1000.0


def test_symbols_share_one_row_per_distinct_symbol():
    hmm = random_hmm(2, 4, 5)
    evidence = read_evidence(hmm, [[3, -1, 3], [0, 3, -1]], None, None)
    assert evidence.likelihoods.shape == (2, 4)
    np.testing.assert_array_equal(evidence.rows, [[1, -1, 1], [0, 1, -1]])
    np.testing.assert_array_equal(evidence.likelihoods, hmm.emission[:, [0, 3]].T)
    np.testing.assert_array_equal(evidence.offsets(np.zeros((2, 3), bool)), [0.0, 0.0])


def test_bad_inputs_are_named():
    hmm = random_hmm(2, 4, 5)
    with pytest.raises(ValueError, match="got observations, log_likelihoods"):
        read_evidence(hmm, [0], None, [[0.0] * 4])
    with pytest.raises(ValueError, match="per-step likelihoods go in likelihoods="):
        read_evidence(hmm, [0.5, 0.2], None, None)
    with pytest.raises(ValueError, match="likelihoods has <U1 entries; allowed: real numbers"):
        read_evidence(hmm, None, np.array([["a"] * 4]), None)
    with pytest.raises(ValueError, match=r"initial must have shape \(4,\) or \(B, 4\)"):
        read_initial(hmm, np.ones(3) / 3)
