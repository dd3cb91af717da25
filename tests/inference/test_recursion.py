"""Transitions that change with time, and the recursions stepped in Python: against every
path of tiny models, against the compiled recursions on constant transitions of every
format, in every form the transitions may take, and bad transitions refused in one line."""

import brute_force
import numpy as np
import pytest
import scipy.sparse as sp
from cases import FORMATS, evidence_kinds, gaussian_model, symbols, tiny_cases, tiny_hmm
from hypothesis import given

from pipeline.inference import (
    filtering,
    filtering_chunks,
    path_log_probability,
    predict,
    sample,
    smoothing,
    smoothing_chunks,
    viterbi,
)
from pipeline.models import HMM
from pipeline.operators import toarray
from pipeline.testing.random_models import random_hmm, random_stochastic


def time_varying(seed: int, n: int, m: int, steps: int):
    """A random dense HMM (its prior and emission) and random transitions (steps - 1, n, n)."""
    rng = np.random.default_rng([seed, 1])
    transitions = np.array([random_stochastic(rng, n, n) for _ in range(steps - 1)])
    return random_hmm(seed, n, m), transitions.reshape(steps - 1, n, n)


@given(**tiny_cases())
def test_time_varying_transitions_against_every_path(seed, n, m, observed):
    """Filtering, smoothing (posteriors, evidence, each step's counts) and Viterbi of a random
    time-varying dense HMM, from symbols (missing ones included), likelihoods and
    log-likelihoods, to 1e-12 of the enumeration over every path."""
    observations = symbols(observed, m)
    hmm, transitions = time_varying(seed, n, m, observations.size)
    kinds, logs = evidence_kinds(hmm, observations)
    posteriors, log_evidence, counts = brute_force.smoothing(hmm.prior, transitions, logs)
    filtered = brute_force.filtering(hmm.prior, transitions, logs)
    every, weights = brute_force.paths(hmm.prior, transitions, logs)
    _, best = brute_force.viterbi(hmm.prior, transitions, logs)
    tied = {tuple(p) for p in every[weights >= best - 1e-12 * abs(best)]}
    for kind, given_ in kinds.items():
        smoothed = smoothing(hmm, **{kind: given_}, counts=True, transitions=transitions)
        np.testing.assert_allclose(smoothed.posteriors, posteriors, rtol=1e-12, atol=1e-12)
        assert smoothed.log_evidence == pytest.approx(log_evidence, rel=1e-12, abs=1e-12)
        assert smoothed.transition_counts.shape == (observations.size - 1, n, n)
        np.testing.assert_allclose(smoothed.transition_counts, counts, rtol=1e-12, atol=1e-12)
        forward = filtering(hmm, **{kind: given_}, transitions=transitions)
        np.testing.assert_allclose(forward.beliefs, filtered, rtol=1e-12, atol=1e-12)
        decoded = viterbi(hmm, **{kind: given_}, transitions=transitions, checkpoint=2)
        assert tuple(decoded.path) in tied, kind
        assert decoded.log_probability == pytest.approx(best, rel=1e-12, abs=1e-12)
        assert path_log_probability(
            hmm, decoded.path, **{kind: given_}, transitions=transitions
        ) == pytest.approx(best, rel=1e-12, abs=1e-12)


def test_every_form_of_the_transitions_gives_the_same_numbers():
    """An array, a sequence of arrays and a callable step alike, to the last bit; a sequence
    of CSR matrices (the CSR step) to rounding."""
    hmm, transitions = time_varying(3, 4, 3, 9)
    observations = np.array([0, 2, -1, 1, 1, 0, -1, 2, 0])
    reference = smoothing(hmm, observations, transitions=transitions, counts=True)
    for form in (list(transitions), lambda t: transitions[t]):
        same = smoothing(hmm, observations, transitions=form, counts=True)
        np.testing.assert_array_equal(same.posteriors, reference.posteriors)
        assert same.log_evidence == reference.log_evidence
        np.testing.assert_array_equal(np.stack(same.transition_counts), reference.transition_counts)
    sparse = smoothing(
        hmm, observations, transitions=[sp.csr_array(m) for m in transitions], counts=True
    )
    np.testing.assert_allclose(sparse.posteriors, reference.posteriors, rtol=1e-13)
    assert isinstance(sparse.transition_counts[0], sp.csr_array)
    np.testing.assert_allclose(
        np.stack([toarray(c) for c in sparse.transition_counts]),
        reference.transition_counts,
        atol=1e-15,
    )


@pytest.mark.parametrize("form", sorted(FORMATS))
def test_a_constant_transition_stepped_in_python_is_the_compiled_recursion(form):
    """Every format's matrix given for every step runs the Python loop; it agrees with the
    compiled recursions: filtering (pruned too, and a batch), smoothing and its counts,
    Viterbi, and the chunked and checkpointed runs of the loop with its whole run."""
    hmm = tiny_hmm(form, 7, 9, 4)
    observations = np.random.default_rng(2).integers(-1, 4, size=14)
    every = [hmm.transition] * (observations.size - 1)
    close = {"rtol": 1e-12, "atol": 1e-14}
    for prune in (1.0, 0.8):
        compiled = filtering(hmm, observations, prune=prune)
        stepped = filtering(hmm, observations, prune=prune, transitions=every)
        np.testing.assert_allclose(stepped.beliefs, compiled.beliefs, **close)
        np.testing.assert_allclose(stepped.pruned, compiled.pruned, **close)
        assert stepped.log_evidence == pytest.approx(compiled.log_evidence, rel=1e-12)
    batch = np.stack([observations, observations[::-1]])
    np.testing.assert_allclose(
        filtering(hmm, batch, prune=0.8, transitions=every).beliefs,
        filtering(hmm, batch, prune=0.8).beliefs,
        **close,
    )
    compiled = smoothing(hmm, observations, counts=True)
    stepped = smoothing(hmm, observations, counts=True, transitions=every)
    np.testing.assert_allclose(stepped.posteriors, compiled.posteriors, **close)
    assert stepped.log_evidence == pytest.approx(compiled.log_evidence, rel=1e-12)
    summed = sum(toarray(c) for c in stepped.transition_counts)
    np.testing.assert_allclose(summed, toarray(compiled.transition_counts), **close)
    batched = smoothing(hmm, batch, counts=True, transitions=every)
    np.testing.assert_allclose(
        sum(toarray(c) for c in batched.transition_counts),
        toarray(smoothing(hmm, batch, counts=True).transition_counts),
        **close,
    )
    decoded = viterbi(hmm, observations, transitions=every)
    np.testing.assert_array_equal(decoded.path, viterbi(hmm, observations).path)
    np.testing.assert_array_equal(
        viterbi(hmm, observations, transitions=every, checkpoint=3).path, decoded.path
    )
    chunks = [
        c.beliefs.copy() for c in filtering_chunks(hmm, observations, chunk=4, transitions=every)
    ]
    np.testing.assert_array_equal(
        np.concatenate(chunks), filtering(hmm, observations, transitions=every).beliefs
    )
    parts = [
        c.posteriors.copy()
        for c in smoothing_chunks(hmm, observations, checkpoint=4, transitions=every)
    ]
    np.testing.assert_array_equal(np.concatenate(parts[::-1]), stepped.posteriors)


def test_an_impossible_observation_follows_the_one_convention():
    """Stepped as compiled: the step keeps its prediction, is listed, makes the evidence
    -inf, and counts as unobserved going backward; Viterbi lists it too."""
    moves = np.array([[0.6, 0.4, 0.0], [0.3, 0.7, 0.0], [0.5, 0.5, 0.0]])  # never into state 2
    emission = np.array([[0.9, 0.1, 0.0], [0.2, 0.8, 0.0], [0.0, 0.0, 1.0]])
    hmm = HMM(np.array([0.5, 0.5, 0.0]), moves, emission)
    observations = np.array([0, 1, 2, 0, 1])  # symbol 2 only from state 2, at step 2
    every = [moves] * (observations.size - 1)
    compiled, stepped = (
        (
            filtering(hmm, observations, transitions=t),
            smoothing(hmm, observations, transitions=t),
            viterbi(hmm, observations, transitions=t),
        )
        for t in (None, every)
    )
    for forward, smoothed, decoded in (compiled, stepped):
        assert forward.log_evidence == smoothed.log_evidence == decoded.log_probability == -np.inf
        for steps in (forward.zero_evidence, smoothed.zero_evidence, decoded.zero_evidence):
            np.testing.assert_array_equal(steps, [2])
        np.testing.assert_allclose(forward.beliefs[2], forward.beliefs[1] @ moves)  # predicted
    for mine, theirs in zip(stepped[:2], compiled[:2], strict=True):
        np.testing.assert_allclose(mine[0], theirs[0], rtol=1e-12)
    np.testing.assert_array_equal(stepped[2].path, compiled[2].path)


def test_sampled_and_predicted_paths_take_each_steps_transition():
    """Permutations as the transitions: each sampled state is the permutation of the one
    before, and a point mass is predicted along the permuted states."""
    rng = np.random.default_rng(0)
    n, horizon = 5, 6
    permutations = [rng.permutation(n) for _ in range(horizon)]
    transitions = np.stack([np.eye(n)[p] for p in permutations])
    hmm = random_hmm(1, n, 3)
    drawn = sample(hmm, horizon, seed=2, n_sequences=8, transitions=transitions)
    predicted = predict(hmm, horizon, initial=np.eye(n)[0], transitions=transitions)
    state = 0
    for t, p in enumerate(permutations):
        np.testing.assert_array_equal(drawn.states[:, t + 1], p[drawn.states[:, t]])
        state = p[state]
        np.testing.assert_array_equal(predicted[t + 1], np.eye(n)[state])


BAD = [
    (
        np.full((2, 3, 3), 1 / 3),
        "transitions has shape (2, 3, 3); a sequence of 4 steps of 3 states takes (3, 3, 3)",
    ),
    (
        [np.eye(3)] * 2,
        "transitions has 2 steps; a sequence of 4 steps takes 3, one per move from step t to t + 1",
    ),
    (
        [np.eye(3), np.eye(2), np.eye(3)],
        "transitions[1] has shape (2, 2); with 3 states it must be (3, 3)",
    ),
    (
        np.stack([np.eye(3), np.eye(3) * 1.5, np.eye(3)]),
        "transitions[1] row 0 sums to 1.5; it must sum to 1 within 1e-09",
    ),
    (
        np.stack([np.eye(3)] * 2 + [np.array([[1.1, -0.1, 0], [0, 1, 0], [0, 0, 1]])]),
        "transitions[2][0, 1] = -0.1; entries must be finite and non-negative",
    ),
    (
        lambda t: np.eye(3) * (2 if t == 2 else 1),
        "transitions(2) row 0 sums to 2; it must sum to 1 within 1e-09",
    ),
    (
        3,
        "transitions is a int; allowed: an array (3, 3, 3), a sequence of 3 operators, or a "
        "callable t -> operator",
    ),
]


@pytest.mark.parametrize("transitions, message", BAD)
def test_bad_transitions_are_refused_in_one_line_naming_the_step(transitions, message):
    hmm = random_hmm(0, 3, 2)
    for run in (smoothing, viterbi):
        with pytest.raises(ValueError) as error:
            run(hmm, [0, 1, -1, 0], transitions=transitions)
        assert str(error.value) == message


@pytest.mark.dynamax
def test_time_varying_transitions_against_dynamax():
    """dynamax's convention, ``transition_matrix`` (T - 1, K, K): its smoother's filtered and
    smoothed beliefs, evidence and per-step ``trans_probs``, and its posterior mode."""
    import jax
    import jax.numpy as jnp
    from dynamax.hidden_markov_model import inference

    jax.config.update("jax_enable_x64", True)
    hmm, logs = gaussian_model(4, 6, 80)
    transitions = time_varying(4, 6, 1, 80)[1]
    arrays = jnp.asarray(hmm.prior), jnp.asarray(transitions), jnp.asarray(logs)
    expected = inference.hmm_smoother(*arrays)
    result = smoothing(hmm, log_likelihoods=logs, transitions=transitions, counts=True)
    np.testing.assert_allclose(result.posteriors, expected.smoothed_probs, rtol=1e-9, atol=1e-12)
    assert result.log_evidence == pytest.approx(float(expected.marginal_loglik), rel=1e-10)
    np.testing.assert_allclose(
        result.transition_counts, expected.trans_probs, rtol=1e-9, atol=1e-12
    )
    filtered = filtering(hmm, log_likelihoods=logs, transitions=transitions)
    np.testing.assert_allclose(filtered.beliefs, expected.filtered_probs, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(
        viterbi(hmm, log_likelihoods=logs, transitions=transitions).path,
        inference.hmm_posterior_mode(*arrays),
    )
