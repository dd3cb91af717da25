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
from hypothesis import example, given

from pipeline.inference import ViterbiBatchResult, ViterbiResult, path_log_probability, viterbi
from pipeline.kernels import maxproduct
from pipeline.methods.topp import topp_hmm
from pipeline.models import HMM, build_model
from pipeline.operators import LowRank, SparsePlusRankOne, toarray


@pytest.mark.parametrize("form", sorted(FORMATS))
@given(**tiny_cases())
@example(seed=2963, n=2, m=1, observed=[0, 0, 0, 0, 0])  # a tie broken by rounding (lowrank)
def test_brute_force_enumeration(form, seed, n, m, observed):
    """The path and its log probability against every path, from symbols (missing ones
    included), likelihoods and log-likelihoods, whole and in segments of two steps. Paths
    whose probabilities are equal as numbers (the same factors in another order) may differ
    by rounding: the path must be one of the most probable (the tie rule on exact ties is
    ``test_ties_go_to_the_lowest_states_from_the_last_step_back``)."""
    hmm = tiny_hmm(form, seed, n, m)
    observations = symbols(observed, m)
    kinds, logs = evidence_kinds(hmm, observations)
    T = toarray(hmm.transition)
    _, log_probability = brute_force.viterbi(hmm.prior, T, logs)
    every, weights = brute_force.paths(hmm.prior, T, logs)
    best = {tuple(p) for p in every[weights >= log_probability - 1e-12 * abs(log_probability)]}
    for kind, given_ in kinds.items():
        for checkpoint in (None, 2):
            result = viterbi(hmm, **{kind: given_}, checkpoint=checkpoint)
            assert isinstance(result, ViterbiResult)
            assert tuple(result.path) in best, (kind, result.path)
            assert result.log_probability == pytest.approx(log_probability, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("form", sorted(FORMATS))
@given(**tiny_cases(4))
def test_a_paths_log_probability_is_its_term_of_the_enumeration(form, seed, n, m, observed):
    """Every path of a tiny model scored from symbols (missing ones included), likelihoods
    and log-likelihoods, against its weight in the enumeration (-inf where impossible)."""
    hmm = tiny_hmm(form, seed, n, m)
    observations = symbols(observed, m)
    kinds, logs = evidence_kinds(hmm, observations)
    every, weights = brute_force.paths(hmm.prior, toarray(hmm.transition), logs)
    for kind, given_ in kinds.items():
        scored = [path_log_probability(hmm, path, **{kind: given_}) for path in every]
        np.testing.assert_allclose(scored, weights, rtol=1e-12, atol=1e-12, err_msg=kind)


def test_a_paths_log_probability_refuses_what_it_cannot_score():
    hmm = tiny_hmm("dense", 0, 3, 2)
    for path, observations, match in [
        ([0, 3], [0, 1], "outside 0..2"),
        ([0.5, 1], [0, 1], "non-empty 1-D array of states"),
        ([0, 1, 2], [0, 1], "one sequence of 3 steps"),
    ]:
        with pytest.raises(ValueError, match=match):
            path_log_probability(hmm, np.array(path), np.array(observations))


def _tied(form: str, n: int) -> HMM:
    """Uniform transitions and emissions of powers of two: many paths tie exactly."""
    if form == "structured":
        transition = SparsePlusRankOne(sp.csr_array((n, n)), np.full(n, 1 / n), np.ones(n))
    elif form == "lowrank":
        transition = LowRank(np.full((n, 1), 1 / n), np.ones((n, 1)))
    else:
        transition = np.full((n, n), 1 / n)
    emission = np.array([[0.5, 0.5], [0.5, 0.5], [0.75, 0.25], [0.75, 0.25]][:n])
    return HMM(np.full(n, 1 / n), transition, emission)


@pytest.mark.parametrize("form", ["dense", "structured", "lowrank"])
def test_ties_go_to_the_lowest_states_from_the_last_step_back(form):
    """States 2 and 3 emit symbol 0 with 3/4, 0 and 1 with 1/2, every transition is 1/4:
    every best path runs through {2, 3} where 0 is seen and through any state where 1 is,
    and the lowest of each tie is taken, the last step first."""
    hmm = _tied(form, 4)
    observations = np.array([0, 1, 0, 0, 1])
    logs = brute_force.symbol_log_likelihoods(toarray(hmm.emission), observations)
    expected, log_probability = brute_force.viterbi(hmm.prior, toarray(hmm.transition), logs)
    result = viterbi(hmm, observations)
    np.testing.assert_array_equal(result.path, [2, 0, 2, 2, 0])
    np.testing.assert_array_equal(result.path, expected)
    assert result.log_probability == pytest.approx(log_probability, rel=1e-14)


def joint_log_probability(hmm: HMM, path, observations) -> float:
    """``log P(path, observations)`` under ``hmm`` (dense arrays), every step observed."""
    T, E = toarray(hmm.transition), toarray(hmm.emission)
    steps = np.log(T[path[:-1], path[1:]]).sum()
    return np.log(hmm.prior[path[0]]) + steps + np.log(E[path, observations]).sum()


@pytest.mark.parametrize("name, hmm", list(models()))
def test_against_hmmlearn(name, hmm):
    """``decode`` of hmmlearn's log-space Viterbi: the log probability to 1e-10, and the same
    path, or one as probable (Bell's rows are mirror images: some paths tie exactly, and
    sums of logs and products break a tie by rounding, each its own way)."""
    reference = hmmlearn_reference(hmm)
    observations = reference.sample(60, random_state=4)[0][:, 0]
    log_probability, path = reference.decode(observations[:, None], algorithm="viterbi")
    result = viterbi(hmm, observations)
    assert result.log_probability == pytest.approx(log_probability, rel=1e-10)
    ours = joint_log_probability(hmm, result.path, observations)
    assert ours == pytest.approx(result.log_probability, rel=1e-12)
    if name in ("dense", "kernel", "banded"):  # no exact ties
        np.testing.assert_array_equal(result.path, path)
    else:
        assert joint_log_probability(hmm, path, observations) == pytest.approx(ours, rel=1e-13)


@pytest.mark.parametrize("checkpoint", [1, 3, 7, 40, 1000])
def test_segments_from_checkpoints_decode_the_same_path(checkpoint, monkeypatch):
    """Segments of any length give the whole run's path and log probability to the last
    bit, with back-pointers of the narrowest type (300 states: 16 bits)."""
    hmm = build_model("bell", 300, seed=2)
    observations = np.random.default_rng(3).integers(-1, hmm.n_observations, size=40)
    whole = viterbi(hmm, observations)
    widths = set()
    recursion = maxproduct.viterbi

    def recorded(*arguments):
        widths.add(arguments[6].dtype)
        return recursion(*arguments)

    monkeypatch.setattr(maxproduct, "viterbi", recorded)
    segmented = viterbi(hmm, observations, checkpoint=checkpoint)
    np.testing.assert_array_equal(segmented.path, whole.path)
    assert segmented.log_probability == whole.log_probability
    assert widths == {np.dtype(np.uint16)}


def test_a_batch_equals_its_members():
    hmm = tiny_hmm("csr", 3, 12, 4)
    rng = np.random.default_rng(5)
    observations = rng.integers(-1, 4, size=(3, 10))
    batch = viterbi(hmm, observations)
    assert isinstance(batch, ViterbiBatchResult) and batch.path.shape == (3, 10)
    for b in range(3):
        member = viterbi(hmm, observations[b])
        np.testing.assert_array_equal(batch.path[b], member.path)
        assert batch.log_probability[b] == member.log_probability


def test_a_hundred_thousand_steps_stay_finite():
    hmm = build_model("bell", 30, seed=4)
    observations = np.random.default_rng(4).integers(-1, hmm.n_observations, size=10**5)
    result = viterbi(hmm, observations)
    assert np.isfinite(result.log_probability) and result.path.shape == (10**5,)
    steps = np.log(hmm.transition[result.path[:-1], result.path[1:]]).sum()
    seen = observations >= 0
    emitted = np.log(hmm.emission[result.path[seen], observations[seen]]).sum()
    assert result.log_probability == pytest.approx(
        np.log(hmm.prior[result.path[0]]) + steps + emitted, rel=1e-10
    )


@pytest.mark.parametrize("tiny", [1e-322, 5e-324])
def test_tiny_likelihoods_keep_the_log_probability_exact(tiny):
    hmm = HMM(np.full(3, 1 / 3), np.full((3, 3), 1 / 3), np.ones((3, 1)))
    result = viterbi(hmm, likelihoods=np.full((2000, 3), tiny))
    assert result.log_probability == pytest.approx(2000 * (np.log(tiny) - np.log(3)), rel=1e-12)
    np.testing.assert_array_equal(result.path, 0)


def test_impossible_observations_count_as_unobserved():
    top = topp_hmm(build_model("uniform", 10), 0.5)  # symbols 5..9 impossible
    result = viterbi(top, np.array([3, 7, -1, 7, 2]))
    np.testing.assert_array_equal(result.zero_evidence, [1, 3])
    assert result.log_probability == -np.inf
    np.testing.assert_array_equal(result.path, viterbi(top, np.array([3, -1, -1, -1, 2])).path)


@pytest.mark.parametrize("seed", range(3))
def test_gaussian_log_likelihoods_against_brute_force(seed):
    hmm, logs = gaussian_model(seed, 3, 6)
    path, log_probability = brute_force.viterbi(hmm.prior, hmm.transition, logs)
    result = viterbi(hmm, log_likelihoods=logs)
    np.testing.assert_array_equal(result.path, path)
    assert result.log_probability == pytest.approx(log_probability, rel=1e-10)


@pytest.mark.dynamax
@pytest.mark.parametrize("seed", range(3))
def test_gaussian_log_likelihoods_against_dynamax(seed):
    import jax
    import jax.numpy as jnp
    from dynamax.hidden_markov_model import inference

    jax.config.update("jax_enable_x64", True)
    hmm, logs = gaussian_model(seed, 8, 200)
    arrays = jnp.asarray(hmm.prior), jnp.asarray(hmm.transition), jnp.asarray(logs)
    np.testing.assert_array_equal(
        viterbi(hmm, log_likelihoods=logs).path, inference.hmm_posterior_mode(*arrays)
    )


def test_a_large_low_rank_model_is_refused_in_one_line():
    hmm = build_model("kernel", 6000, n_features=2, n_observations=4)
    with pytest.raises(ValueError, match=r"^the max-product step of a 6000 x 6000 low-rank"):
        viterbi(hmm, [0, 1])
