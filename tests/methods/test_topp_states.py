"""Belief pruning ("top-p states"): the method and the bound derived for it."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pipeline.inference import predict
from pipeline.methods import approximate
from pipeline.metrics import error_bounds, minimal_mixing_rate, total_variation, tv_bounds
from pipeline.models import build_model


def test_the_approximation_is_the_exact_model_with_pruning():
    hmm = build_model("bell", 40, seed=1)
    approximation = approximate(hmm, "topp_states", 0.9)
    assert approximation.hmm is hmm and approximation.prune == 0.9
    assert approximation.prior_error == 0 and not approximation.row_error.any()
    assert (
        abs(approximation.step_error - 0.1) < 1e-9 and abs(approximation.start_error - 0.1) < 1e-9
    )


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 30),
    alpha=st.sampled_from([0.05, 0.3, 1.0, 5.0]),
    p=st.one_of(st.floats(0.05, 1.0), st.sampled_from([0.5, 0.9, 0.99, 1.0])),
)
def test_the_prediction_error_obeys_the_top_p_recursion(seed, n, alpha, p):
    """TV(P_t, Q_t) <= (1 - gamma) TV(P_{t-1}, Q_{t-1}) + (1 - p), from TV(P_0, Q_0) <= 1 - p."""
    hmm = build_model("dirichlet", n, seed=seed, alpha=alpha)
    tv = total_variation(predict(hmm, 40), predict(hmm, 40, prune=p))
    gamma = minimal_mixing_rate(hmm.transition)
    bound = tv_bounds(p, gamma, np.arange(41))["recursive"]
    assert np.all(tv <= bound + 1e-9)
    assert np.all(tv <= error_bounds(1 - p, gamma, np.arange(41))["mixing"] + 1e-9)


def test_the_recursion_is_tight_for_the_uniform_hmm():
    # Every belief is uniform: pruning keeps ceil(p n) states and the exact step restores
    # the uniform belief, so the error is 1 - p at every step, gamma = 1 and the bound is met.
    hmm = build_model("uniform", 50)
    tv = total_variation(predict(hmm, 6), predict(hmm, 6, prune=0.7))
    np.testing.assert_allclose(tv, 0.3, atol=1e-12)
    np.testing.assert_allclose(tv, tv_bounds(0.7, 1.0, np.arange(7))["recursive"], atol=1e-12)
