import numpy as np

from pipeline.inference import filtering
from pipeline.kernels import backward
from pipeline.models import build_model


def test_posteriors_in_place_equal_posteriors_apart_and_the_last_pair_is_empty():
    """The recursion may overwrite the filtered beliefs with the posteriors; ``after`` pairs
    each step with the next, so the last row is zero and each earlier one with the filtered
    belief makes a joint distribution of two steps (its entries sum to 1)."""
    hmm = build_model("bell", 25, seed=3)
    observations = np.random.default_rng(1).integers(-1, hmm.n_observations, size=12)
    filtered = filtering(hmm, observations)
    layout = hmm.transition_layout
    likelihoods = np.ascontiguousarray(hmm.emission[:, np.arange(hmm.n_observations)].T)
    rows = observations.astype(np.int64)
    zero = np.zeros(12, bool)
    alphas = filtered.beliefs.copy()
    apart, after = np.empty_like(alphas), np.empty_like(alphas)
    backward.backward(layout, likelihoods, rows, zero, alphas, apart, np.empty(25), True, after)
    in_place = filtered.beliefs.copy()
    backward.backward(
        layout, likelihoods, rows, zero, in_place, in_place, np.empty(25), True, np.empty((0, 25))
    )
    np.testing.assert_array_equal(in_place, apart)
    np.testing.assert_array_equal(after[-1], 0.0)
    joints = alphas[:-1, :, None] * hmm.transition[None] * after[:-1, None, :]
    np.testing.assert_allclose(joints.sum(axis=(1, 2)), 1.0, rtol=1e-12)
    np.testing.assert_allclose(joints.sum(axis=2), apart[:-1], rtol=1e-10, atol=1e-15)
