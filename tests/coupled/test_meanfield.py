"""Structured mean field and chain-wise Viterbi against exact inference and brute force."""

import itertools

import numpy as np
import pytest
from inference import brute_force

from pipeline.coupled import exact, meanfield
from pipeline.coupled.family import build
from pipeline.coupled.model import CoupledHMM
from pipeline.coupled.viterbi import _update, chainwise_viterbi


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_a_chains_smoother_against_every_path(steps):
    """One chain's forward-backward over time-varying transitions (the others' marginals mixed
    in) against the enumeration, to 1e-12: smoothed and filtered beliefs, the emission cavity
    (every step's evidence but the chain's own emission there), and the pair marginals
    ``alpha[t] T_t gamma[t + 1]`` the messages to the other chains are made of."""
    rng = np.random.default_rng(steps)
    n = 3
    prior = rng.dirichlet(np.ones(n))
    transitions = rng.dirichlet(np.ones(n), size=(max(steps - 1, 1), n))
    emissions, messages = rng.random((steps, n)), rng.random((steps, n)) + 0.1
    chain = meanfield._chain_smoother(prior, transitions, emissions, messages)
    moves = transitions[: steps - 1]
    logs = np.log(emissions * messages)
    smoothed, _, pairs = brute_force.smoothing(prior, moves, logs)
    np.testing.assert_allclose(chain.smoothed, smoothed, atol=1e-12)
    np.testing.assert_allclose(chain.alpha, brute_force.filtering(prior, moves, logs), atol=1e-12)
    for t in range(steps):
        without = logs.copy()
        without[t] = np.log(messages[t])
        expected = brute_force.smoothing(prior, moves, without)[0][t]
        np.testing.assert_allclose(chain.cavity[t], expected, atol=1e-12)
    for t in range(steps - 1):
        pair = chain.alpha[t][:, None] * transitions[t] * chain.gamma[t + 1][None, :]
        np.testing.assert_allclose(pair / pair.sum(), pairs[t], atol=1e-12)


def sequence(model, steps=20, every=2, seed=0):
    paths, observations = model.sample(steps, np.random.default_rng(seed))
    observations[np.arange(steps) % every != 0] = -1
    return paths, observations


@pytest.mark.parametrize(("chains", "n"), [(2, 4), (3, 3), (4, 2)])
def test_exact_for_independent_chains_observed_chain_by_chain(chains, n):
    model = build(chains, n, seed=chains, eps=0.0, n_observations=3)
    _, observations = sequence(model)
    reference = exact.smoothing(model, observations)
    filtered = meanfield.filtering(model, observations).marginals
    smoothed = meanfield.smoothing(model, observations)
    assert smoothed.converged
    for mine, theirs in zip(
        filtered, exact.marginals(reference.filtered, model.sizes), strict=True
    ):
        np.testing.assert_allclose(mine, theirs, atol=1e-10)
    for mine, theirs in zip(
        smoothed.marginals, exact.marginals(reference.smoothed, model.sizes), strict=True
    ):
        np.testing.assert_allclose(mine, theirs, atol=1e-6)
    hard = chainwise_viterbi(model, observations)
    best, log_joint = exact.viterbi(model, observations)
    np.testing.assert_array_equal(hard.paths, best)
    assert hard.log_joint == pytest.approx(log_joint, abs=1e-9)
    assert hard.iterations == 1 and hard.converged


def test_set_observation_couples_the_chains_even_without_eps():
    """With the set of symbols observed, mean field is not exact at eps = 0."""
    model = build(2, 3, seed=3, eps=0.0, n_observations=3, observe="set", alpha=1.0)
    _, observations = sequence(model, every=1)
    reference = exact.marginals(exact.smoothing(model, observations).smoothed, model.sizes)
    smoothed = meanfield.smoothing(model, observations)
    assert smoothed.converged
    error = max(np.abs(a - b).max() for a, b in zip(smoothed.marginals, reference, strict=True))
    assert error > 1e-3


@pytest.mark.parametrize("observe", ["chain", "set"])
def test_coupled_marginals_are_close_and_distributions(observe):
    model = build(3, 3, seed=7, eps=0.05, n_observations=3, observe=observe)
    _, observations = sequence(model, steps=15)
    reference = exact.smoothing(model, observations)
    smoothed = meanfield.smoothing(model, observations)
    assert smoothed.converged
    for marginals, joint in (
        (meanfield.filtering(model, observations).marginals, reference.filtered),
        (smoothed.marginals, reference.smoothed),
    ):
        for mine, theirs in zip(marginals, exact.marginals(joint, model.sizes), strict=True):
            np.testing.assert_allclose(mine.sum(axis=1), 1.0)
            assert 0.5 * np.abs(mine - theirs).sum(axis=1).max() < 0.25


def copying(seed=0, n=3, steps=20):
    """Chain 0 moves to chain 1's last state (and is heard); chain 1 moves by its own table
    and is never heard: all that is known of chain 1 comes through chain 0's moves."""
    rng = np.random.default_rng(seed)
    heard = np.eye(n) * 0.8 + 0.2 / n
    model = CoupledHMM(
        priors=(np.full(n, 1 / n), rng.dirichlet(np.ones(n))),
        weights=np.array([[0.0, 1.0], [0.0, 1.0]]),
        own=(rng.dirichlet(np.ones(n), size=n), rng.dirichlet(np.ones(n) * 0.5, size=n)),
        pairs=((None, np.broadcast_to(np.eye(n)[None], (n, n, n))), (None, None)),
        emissions=(heard / heard.sum(axis=1, keepdims=True), np.full((n, 2), 0.5)),
    )
    return model, model.sample(steps, np.random.default_rng(seed + 1))[1]


def test_the_other_chains_moves_inform_a_chain():
    """Everything known of chain 1 comes from chain 0's moves (term (d) of the seed): the
    coupling forms no loop, so the structured mean field's fixed point is exact."""
    model, observations = copying()
    reference = exact.marginals(exact.smoothing(model, observations).smoothed, model.sizes)
    smoothed = meanfield.smoothing(model, observations)
    assert smoothed.converged
    for mine, theirs in zip(smoothed.marginals, reference, strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-9)
    assert reference[1].max(axis=1).mean() > 0.6  # chain 1 is far from uniform: there was evidence


def test_a_chain_update_is_the_best_path_of_that_chain():
    """Equations (a) to (d): chain i's update maximises log P(x, o) over chain i's path with the
    others fixed, checked against every path of chain i."""
    model = build(3, 3, seed=2, eps=0.4, n_observations=3)
    paths, observations = sequence(model, steps=5, every=1)
    for i in range(model.chains):
        new = _update(model, i, paths.copy(), observations)
        scores = {}
        for candidate in itertools.product(range(3), repeat=5):
            trial = paths.copy()
            trial[:, i] = candidate
            scores[candidate] = model.log_joint(trial, observations)
        best = max(scores.values())
        trial = paths.copy()
        trial[:, i] = new
        assert model.log_joint(trial, observations) == pytest.approx(best, abs=1e-10)


def test_chainwise_viterbi_ascends_to_at_most_the_exact_optimum():
    model = build(2, 4, seed=11, eps=0.5, n_observations=2)
    _, observations = sequence(model, steps=25, every=1)
    values = [
        chainwise_viterbi(model, observations, max_iterations=m).log_joint for m in range(1, 6)
    ]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(values))
    result = chainwise_viterbi(model, observations)
    assert result.converged
    assert result.log_joint == pytest.approx(model.log_joint(result.paths, observations))
    assert result.log_joint <= exact.viterbi(model, observations)[1] + 1e-9


@pytest.mark.parametrize("chains", [2, 3])
def test_one_step_is_exact_even_through_a_shared_observation(chains):
    """One step and the set of symbols observed: one factor joins the chains, a tree, so the
    mean field's messages give the exact marginals."""
    model = build(chains, 3, seed=5, eps=0.4, n_observations=3, observe="set", alpha=1.0)
    _, observations = model.sample(1, np.random.default_rng(0))
    reference = exact.marginals(exact.smoothing(model, observations).smoothed, model.sizes)
    for result in (
        meanfield.filtering(model, observations),
        meanfield.smoothing(model, observations),
    ):
        assert result.converged
        for mine, theirs in zip(result.marginals, reference, strict=True):
            np.testing.assert_allclose(mine, theirs, atol=1e-9)


def test_unequal_chains_with_pairwise_tables_and_nothing_observed():
    rng = np.random.default_rng(4)
    sizes = (3, 2)
    model = CoupledHMM(
        priors=tuple(rng.dirichlet(np.ones(n)) for n in sizes),
        weights=np.array([[0.7, 0.3], [0.2, 0.8]]),
        own=tuple(rng.dirichlet(np.ones(n), size=n) for n in sizes),
        pairs=(
            (None, rng.dirichlet(np.ones(3), size=(3, 2))),
            (rng.dirichlet(np.ones(2), size=(2, 3)), None),
        ),
        emissions=tuple(rng.dirichlet(np.ones(2), size=n) for n in sizes),
    )
    for observations in (np.full(6, -1), model.sample(6, rng)[1]):
        reference = exact.smoothing(model, observations)
        smoothed = meanfield.smoothing(model, observations)
        filtered = meanfield.filtering(model, observations)
        assert smoothed.converged and filtered.converged
        for result, joint in ((filtered, reference.filtered), (smoothed, reference.smoothed)):
            assert [m.shape for m in result.marginals] == [(6, 3), (6, 2)]
            for mine, theirs in zip(result.marginals, exact.marginals(joint, sizes), strict=True):
                np.testing.assert_allclose(mine.sum(axis=1), 1.0)
                assert 0.5 * np.abs(mine - theirs).sum(axis=1).max() < 0.1
        hard = chainwise_viterbi(model, observations)
        assert hard.converged
        assert hard.log_joint <= exact.viterbi(model, observations)[1] + 1e-9
