import brute_force
import numpy as np
import pytest
import scipy.sparse as sp
from cases import (
    FORMATS,
    evidence_kinds,
    gaussian_model,
    hmmlearn_reference,
    symbols,
    tiny_cases,
    tiny_hmm,
)
from cases import reference_models as models
from hypothesis import given

from pipeline.inference import (
    SmoothBatchResult,
    SmoothResult,
    filtering,
    smoothing,
    smoothing_chunks,
)
from pipeline.methods.topp import topp_hmm
from pipeline.models import build_model
from pipeline.operators import LowRank, SparsePlusRankOne, toarray
from pipeline.testing.random_models import random_hmm


@pytest.mark.parametrize("form", sorted(FORMATS))
@given(**tiny_cases())
def test_brute_force_enumeration(form, seed, n, m, observed):
    """Posteriors, evidence and expected transition counts against every path, from
    symbols (missing ones included), likelihoods and log-likelihoods."""
    hmm = tiny_hmm(form, seed, n, m)
    observations = symbols(observed, m)
    kinds, logs = evidence_kinds(hmm, observations)
    posteriors, log_evidence, counts = brute_force.smoothing(
        hmm.prior, toarray(hmm.transition), logs
    )
    for kind, given_ in kinds.items():
        result = smoothing(hmm, **{kind: given_}, counts=True)
        assert isinstance(result, SmoothResult), kind
        np.testing.assert_allclose(result.posteriors, posteriors, rtol=1e-10, atol=1e-13)
        assert result.log_evidence == pytest.approx(log_evidence, rel=1e-10, abs=1e-12)
        np.testing.assert_allclose(
            toarray(result.transition_counts), counts, rtol=1e-10, atol=1e-13, err_msg=kind
        )
        assert result.zero_evidence.size == 0


@pytest.mark.parametrize("name, hmm", list(models()))
def test_against_hmmlearn(name, hmm):
    """``predict_proba`` and ``score`` of hmmlearn's log-space implementation, to 1e-10."""
    if name == "topp-csr":
        assert isinstance(hmm.transition, sp.csr_array)
    if name == "structured":
        assert isinstance(hmm.transition, SparsePlusRankOne)
    if name in ("kernel", "banded"):
        assert isinstance(hmm.transition, LowRank)
    reference = hmmlearn_reference(hmm)
    observations = reference.sample(60, random_state=3)[0][:, 0]
    result = smoothing(hmm, observations)
    np.testing.assert_allclose(
        result.posteriors, reference.predict_proba(observations[:, None]), rtol=1e-10, atol=1e-13
    )
    assert result.log_evidence == pytest.approx(reference.score(observations[:, None]), rel=1e-10)


@pytest.mark.parametrize("checkpoint", [None, 1, 3, 7, 40])
@pytest.mark.parametrize("form", ["dense", "csr", "structured", "banded"])
def test_chunks_from_checkpoints_equal_the_whole_to_the_last_bit(form, checkpoint):
    hmm = tiny_hmm(form, 5, 12, 4)
    observations = np.random.default_rng(1).integers(-1, 4, size=40)
    whole = smoothing(hmm, observations)
    chunks = [
        (c.start, c.posteriors.copy(), c.log_evidence)
        for c in smoothing_chunks(hmm, observations, checkpoint=checkpoint)
    ]
    starts = [start for start, _, _ in chunks]
    assert starts == sorted(starts, reverse=True) and starts[-1] == 0
    assert np.array_equal(np.concatenate([p for _, p, _ in chunks[::-1]]), whole.posteriors)
    assert {evidence for _, _, evidence in chunks} == {whole.log_evidence}
    filtered = filtering(hmm, observations)
    assert whole.log_evidence == filtered.log_evidence  # the same forward recursion
    np.testing.assert_array_equal(whole.posteriors[-1], filtered.beliefs[-1])


def test_a_batch_equals_its_members_and_sums_their_counts():
    hmm = tiny_hmm("structured", 2, 15, 4)
    rng = np.random.default_rng(2)
    initial = rng.dirichlet(np.ones(15), size=3)
    observations = rng.integers(-1, 4, size=(3, 9))
    batch = smoothing(hmm, observations, initial=initial, counts=True)
    assert isinstance(batch, SmoothBatchResult) and batch.posteriors.shape == (3, 9, 15)
    total = np.zeros((15, 15))
    for b in range(3):
        member = smoothing(hmm, observations[b], initial=initial[b], counts=True)
        np.testing.assert_array_equal(batch.posteriors[b], member.posteriors)
        assert batch.log_evidence[b] == member.log_evidence
        total += toarray(member.transition_counts)
    np.testing.assert_allclose(toarray(batch.transition_counts), total, rtol=1e-12)
    shared = smoothing(hmm, observations[1], initial=initial)  # one sequence, three starts
    np.testing.assert_array_equal(shared.posteriors[1], batch.posteriors[1])


def test_a_hundred_thousand_steps_stay_finite():
    hmm = build_model("bell", 30, seed=4)
    observations = np.random.default_rng(4).integers(-1, hmm.n_observations, size=10**5)
    result = smoothing(hmm, observations)
    assert np.isfinite(result.posteriors).all() and np.isfinite(result.log_evidence)
    np.testing.assert_allclose(result.posteriors.sum(axis=1), 1.0, atol=1e-12)
    assert result.log_evidence == filtering(hmm, observations).log_evidence


@pytest.mark.parametrize("tiny", [1e-322, 5e-324])
def test_tiny_likelihoods_keep_the_evidence_exact(tiny):
    hmm = random_hmm(1, 4, 2)
    steps = 3000
    result = smoothing(hmm, likelihoods=np.full((steps, 4), tiny))
    assert result.log_evidence == pytest.approx(steps * np.log(tiny), rel=1e-12)
    assert result.zero_evidence.size == 0
    predicted = np.vstack([hmm.prior, np.full((steps - 1, 4), np.nan)])
    for t in range(1, steps):  # with equal likelihoods, the posteriors are the predictions
        predicted[t] = predicted[t - 1] @ hmm.transition
    np.testing.assert_allclose(result.posteriors, predicted, rtol=1e-10)


def test_impossible_observations_count_as_unobserved():
    """Top-0.5 of a uniform emission row keeps symbols 0..4: 7 has zero probability."""
    top = topp_hmm(build_model("uniform", 10), 0.5)
    result = smoothing(top, np.array([3, 7, -1, 7, 2]))
    np.testing.assert_array_equal(result.zero_evidence, [1, 3])
    assert result.log_evidence == -np.inf
    unobserved = smoothing(top, np.array([3, -1, -1, -1, 2]))
    np.testing.assert_allclose(result.posteriors, unobserved.posteriors, rtol=1e-14)


@pytest.mark.parametrize("seed", range(4))
def test_gaussian_log_likelihoods_against_brute_force(seed):
    hmm, logs = gaussian_model(seed, 3, 6)
    posteriors, log_evidence, _ = brute_force.smoothing(hmm.prior, hmm.transition, logs)
    result = smoothing(hmm, log_likelihoods=logs)
    np.testing.assert_allclose(result.posteriors, posteriors, rtol=1e-10, atol=1e-13)
    assert result.log_evidence == pytest.approx(log_evidence, rel=1e-10)
    filtered = filtering(hmm, log_likelihoods=logs)
    for t in range(6):  # the filtered belief of step t is the posterior given o_0..o_t
        prefix, _, _ = brute_force.smoothing(hmm.prior, hmm.transition, logs[: t + 1])
        np.testing.assert_allclose(filtered.beliefs[t], prefix[t], rtol=1e-10, atol=1e-13)
    assert filtered.log_evidence == pytest.approx(log_evidence, rel=1e-10)


@pytest.mark.dynamax
@pytest.mark.parametrize("seed", range(3))
def test_gaussian_log_likelihoods_against_dynamax(seed):
    import jax
    import jax.numpy as jnp
    from dynamax.hidden_markov_model import inference

    jax.config.update("jax_enable_x64", True)
    hmm, logs = gaussian_model(seed, 8, 200)
    arrays = jnp.asarray(hmm.prior), jnp.asarray(hmm.transition), jnp.asarray(logs)
    expected = inference.hmm_smoother(*arrays)
    result = smoothing(hmm, log_likelihoods=logs)
    np.testing.assert_allclose(result.posteriors, expected.smoothed_probs, rtol=1e-9, atol=1e-12)
    assert result.log_evidence == pytest.approx(float(expected.marginal_loglik), rel=1e-10)
    filtered = filtering(hmm, log_likelihoods=logs)
    np.testing.assert_allclose(filtered.beliefs, expected.filtered_probs, rtol=1e-9, atol=1e-12)


def test_bad_evidence_is_named():
    hmm = random_hmm(1, 3, 2)
    with pytest.raises(ValueError, match="exactly one of observations, likelihoods and"):
        smoothing(hmm)
    with pytest.raises(ValueError, match=r"got observations, likelihoods$"):
        smoothing(hmm, [0, 1], likelihoods=np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"likelihoods must have shape \(T, 3\)"):
        smoothing(hmm, likelihoods=np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"likelihoods\[1, 2\] is not a finite non-negative"):
        smoothing(hmm, likelihoods=[[1, 1, 1], [1, 1, -1]])
    with pytest.raises(ValueError, match=r"log_likelihoods\[0, 1, 0\] is NaN or \+inf"):
        smoothing(hmm, log_likelihoods=np.array([[[0, 0, 0], [np.nan, 0, 0]]]))
    with pytest.raises(ValueError, match="counts must be True or False"):
        smoothing(hmm, [0], counts="yes")
    with pytest.raises(ValueError, match="checkpoint must be an integer >= 1 or None"):
        next(smoothing_chunks(hmm, [0, 1], checkpoint=0))
