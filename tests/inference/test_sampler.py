import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from pipeline import sampling
from pipeline.inference import Sample, SampleBatch, sample
from pipeline.models import HMM
from pipeline.operators import toarray
from pipeline.testing.random_models import random_hmm

from helpers import random_low_rank, random_structured


def _models():
    """Small HMMs in every transition format (and a CSR and a low-rank emission)."""
    base = random_hmm(1, 6, 4, zeros=0.3)
    yield "dense", base
    yield "csr", HMM(base.prior, sp.csr_array(base.transition), sp.csr_array(base.emission))
    yield "structured", HMM(base.prior, random_structured(2, 6, 6), base.emission)
    yield "lowrank", HMM(base.prior, random_low_rank(3, 6, 6, rank=2), random_low_rank(4, 6, 4))
    banded = random_low_rank(5, 6, 6, rank=2, delta=2, zeros=0.3)
    yield "banded", HMM(base.prior, banded, base.emission)


def _chi_square(observed: np.ndarray, probabilities: np.ndarray) -> float:
    """The p-value of counts against a distribution (cells of zero probability must be empty)."""
    assert observed[probabilities == 0].sum() == 0
    kept = probabilities > 0
    return stats.chisquare(observed[kept], observed.sum() * probabilities[kept]).pvalue


@pytest.mark.parametrize("name, hmm", list(_models()))
def test_draws_match_the_models_frequencies(name, hmm):
    """Chi-square at a fixed seed: the first states against the prior, each state's
    successors against its transition row, each state's symbols against its emission row."""
    drawn = sample(hmm, 40, seed=7, n_sequences=500)
    assert isinstance(drawn, SampleBatch) and drawn.states.shape == (500, 41)
    T, E = toarray(hmm.transition), toarray(hmm.emission)
    n, m = E.shape
    assert _chi_square(np.bincount(drawn.states[:, 0], minlength=n), hmm.prior) > 1e-3
    pairs = np.zeros((n, n))
    np.add.at(pairs, (drawn.states[:, :-1], drawn.states[:, 1:]), 1)
    emitted = np.zeros((n, m))
    np.add.at(emitted, (drawn.states, drawn.observations), 1)
    for i in range(n):
        assert _chi_square(pairs[i], T[i]) > 1e-3, (name, i, pairs[i])
        assert _chi_square(emitted[i], E[i]) > 1e-3, (name, i, emitted[i])


def test_one_sequence_and_a_fixed_seed():
    hmm = random_hmm(2, 5, 3)
    one = sample(hmm, 9, seed=3)
    assert isinstance(one, Sample) and one.states.shape == one.observations.shape == (10,)
    again = sample(hmm, 9, seed=3)
    np.testing.assert_array_equal(one.states, again.states)
    np.testing.assert_array_equal(one.observations, again.observations)
    assert sample(hmm, 0, seed=1).states.shape == (1,)


def test_bad_arguments():
    hmm = random_hmm(2, 5, 3)
    with pytest.raises(ValueError, match="horizon must be an integer >= 0"):
        sample(hmm, -1, seed=0)
    with pytest.raises(ValueError, match="n_sequences must be an integer >= 1, got 0"):
        sample(hmm, 3, seed=0, n_sequences=0)


@pytest.mark.parametrize("horizon, n_sequences", [(10**12, 1), (10**6, 10**6)])
def test_draws_past_the_machines_memory_are_refused_naming_the_arguments(horizon, n_sequences):
    """A horizon of 10^12 raised numpy's MemoryError: the draws' memory is checked first."""
    with pytest.raises(
        ValueError,
        match=rf"^horizon={horizon:,} with n_sequences={n_sequences:,} needs 29\.10 TiB of "
        r"memory \(32 bytes a step and sequence: .*\); allowed: at most this machine's "
        r"[\d,.]+ [KMGT]iB$",
    ):
        sample(random_hmm(2, 5, 3), horizon, seed=0, n_sequences=n_sequences)


def test_the_sweeps_sampler_refuses_steps_past_the_machines_memory():
    """``pipeline.sampling.sample``, the sweep's sampler kept for its draws, the same way."""
    with pytest.raises(
        ValueError,
        match=r"^steps=1,000,000,000,000 needs 14\.55 TiB of memory \(16 bytes a step: the "
        r"states and the symbols\); allowed: at most this machine's [\d,.]+ [KMGT]iB$",
    ):
        sampling.sample(random_hmm(2, 5, 3), 10**12, np.random.default_rng(0))
