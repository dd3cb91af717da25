"""The E-step's statistics: equal to the exact ones under an approximation that keeps
everything, dense and CSR alike, and a low-rank E-step's counts at every entry against a
brute force over the approximation's state paths."""

import numpy as np
import pytest
import scipy.sparse as sp
from inference import brute_force

from pipeline.learning.em import EVERYTHING, e_step, m_step
from pipeline.methods import approximate
from pipeline.models import HMM
from pipeline.operators import row_sums, toarray
from pipeline.testing.random_models import random_hmm

SEQUENCES = [np.array([0, 2, -1, 1, 1, 0]), np.array([2, 1]), np.array([1, -1, 0, 2, 2, 1])]


def _model(form: str) -> HMM:
    dense = random_hmm(1, 4, 3, zeros=0.3)
    if form == "dense":
        return dense
    return HMM(dense.prior, sp.csr_array(dense.transition), sp.csr_array(dense.emission))


@pytest.mark.parametrize("form", ["dense", "csr"])
@pytest.mark.parametrize(("method", "setting"), [("topp", 1.0), ("topk", 4)])
def test_an_approximation_that_keeps_everything_counts_as_the_exact_model(form, method, setting):
    hmm = _model(form)
    exact = e_step(hmm, SEQUENCES)
    kept = e_step(hmm, SEQUENCES, method=method, setting=setting)
    assert exact.kept == EVERYTHING
    assert kept.kept.prior.sum() == np.count_nonzero(hmm.prior)
    assert kept.kept.transition.sum() == np.count_nonzero(toarray(hmm.transition))
    np.testing.assert_allclose(kept.log_likelihood, exact.log_likelihood, rtol=1e-12)
    for field in ("prior", "transition", "posteriors"):
        np.testing.assert_allclose(getattr(kept, field), getattr(exact, field), rtol=0, atol=1e-12)
    assert exact.posteriors.shape == (sum(map(len, SEQUENCES)), 4)
    assert exact.transition.sum() == pytest.approx(sum(len(s) - 1 for s in SEQUENCES))


def test_a_low_rank_e_step_counts_its_product_at_every_entry():
    hmm = random_hmm(2, 5, 3)
    statistics = e_step(hmm, SEQUENCES, method="lowrank", setting=2)
    Q = toarray(approximate(hmm, "lowrank", 2).hmm.transition)
    counts, log_likelihood = np.zeros((5, 5)), []
    for sequence in SEQUENCES:
        logs = brute_force.symbol_log_likelihoods(toarray(hmm.emission), sequence)
        _, evidence, pairs = brute_force.smoothing(hmm.prior, Q, logs)
        counts += pairs
        log_likelihood.append(evidence)
    np.testing.assert_allclose(statistics.transition.reshape(5, 5), counts, rtol=0, atol=1e-12)
    np.testing.assert_allclose(statistics.log_likelihood, log_likelihood, rtol=1e-12)
    np.testing.assert_array_equal(statistics.kept.transition, Q.ravel() > 0)
    learnt, _ = m_step(hmm, statistics, np.concatenate(SEQUENCES))
    np.testing.assert_allclose(row_sums(learnt.transition), 1.0, atol=1e-12)
