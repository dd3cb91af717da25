"""Exact inference on the joint chain against the definition, brute force and hmmlearn."""

import itertools

import numpy as np
import pytest
from hmmlearn.hmm import CategoricalHMM

from pipeline.coupled import exact
from pipeline.coupled.family import build
from pipeline.coupled.model import CoupledHMM
from pipeline.inference import filtering
from pipeline.models import HMM

SHAPES = [(2, 3, "chain"), (3, 2, "chain"), (2, 3, "set"), (3, 2, "set")]


def general(seed=0) -> CoupledHMM:
    """Two chains whose pair tables read both chains' states (not mixed memory)."""
    rng = np.random.default_rng(seed)
    sizes = (3, 2)
    pairs = [
        [None, rng.dirichlet(np.ones(3), size=(3, 2))],
        [rng.dirichlet(np.ones(2), size=(2, 3)), None],
    ]
    return CoupledHMM(
        priors=tuple(rng.dirichlet(np.ones(n)) for n in sizes),
        weights=np.array([[0.6, 0.4], [0.3, 0.7]]),
        own=tuple(rng.dirichlet(np.ones(n), size=n) for n in sizes),
        pairs=tuple(tuple(p) for p in pairs),
        emissions=tuple(rng.dirichlet(np.ones(2), size=n) for n in sizes),
    )


def models():
    yield general()
    for k, n, observe in SHAPES:
        yield build(k, n, seed=k + n, eps=0.3, n_observations=3, observe=observe)


def definition(model: CoupledHMM) -> np.ndarray:
    """T[x, x'] = prod_i (w_ii own_i[x_i, x'_i] + sum_j w_ij pairs_ij[x_i, x_j, x'_i]), entry
    by entry, literally."""
    states = list(itertools.product(*(range(n) for n in model.sizes)))
    T = np.zeros((len(states), len(states)))
    for a, x in enumerate(states):
        for b, y in enumerate(states):
            p = 1.0
            for i in range(model.chains):
                q = model.weights[i, i] * model.own[i][x[i], y[i]]
                for j in range(model.chains):
                    if j != i and model.weights[i, j] > 0:
                        q += model.weights[i, j] * model.pairs[i][j][x[i], x[j], y[i]]
                p *= q
            T[a, b] = p
    return T


def enumerate_paths(hmm: HMM, observations):
    """Brute force over every joint path: smoothed marginals, evidence, the best path."""
    steps, n = len(observations), hmm.n_states
    marginals, total, best = np.zeros((steps, n)), 0.0, (-1.0, None)
    for path in itertools.product(range(n), repeat=steps):
        p = hmm.prior[path[0]]
        for t in range(1, steps):
            p *= hmm.transition[path[t - 1], path[t]]
        for t, o in enumerate(observations):
            if o >= 0:
                p *= hmm.emission[path[t], o]
        total += p
        marginals[np.arange(steps), path] += p
        if p > best[0]:
            best = (p, path)
    return marginals / total, np.log(total), best


@pytest.mark.parametrize("model", list(models()), ids=lambda m: f"{m.sizes}-{m.observe}")
def test_operator_is_the_definition(model):
    T = exact.JointTransition(model)
    dense = definition(model)
    np.testing.assert_allclose(T.toarray(), dense, atol=1e-14)
    np.testing.assert_allclose(model.joint().transition, dense, atol=1e-14)
    rng = np.random.default_rng(1)
    belief, values = rng.dirichlet(np.ones(model.n_joint)), rng.random(model.n_joint)
    np.testing.assert_allclose(T.forward(belief), belief @ dense, atol=1e-14)
    np.testing.assert_allclose(T.backward(values), dense @ values, atol=1e-14)


@pytest.mark.parametrize("model", list(models()), ids=lambda m: f"{m.sizes}-{m.observe}")
def test_smoothing_and_viterbi_against_enumeration(model):
    _, observations = model.sample(4, np.random.default_rng(2))
    observations[2] = -1
    hmm = model.joint()
    marginals, log_evidence, (p_best, best) = enumerate_paths(hmm, observations)
    result = exact.smoothing(model, observations)
    np.testing.assert_allclose(result.smoothed, marginals, atol=1e-12)
    np.testing.assert_allclose(result.filtered, filtering(hmm, observations).beliefs, atol=1e-12)
    assert result.log_evidence == pytest.approx(log_evidence, abs=1e-12)
    path, log_joint = exact.viterbi(model, observations)
    assert log_joint == pytest.approx(np.log(p_best), abs=1e-12)
    np.testing.assert_array_equal(path, model.joint_states[list(best)])
    assert model.log_joint(path, observations) == pytest.approx(log_joint, abs=1e-12)


def test_against_hmmlearn():
    model = build(2, 4, seed=5, eps=0.4, n_observations=3)
    hmm = model.joint()
    _, observations = model.sample(30, np.random.default_rng(3))
    reference = CategoricalHMM(n_components=hmm.n_states, init_params="", params="")
    reference.startprob_, reference.transmat_ = hmm.prior, hmm.transition
    reference.emissionprob_ = hmm.emission
    log_evidence, posteriors = reference.score_samples(observations[:, None])
    result = exact.smoothing(model, observations)
    np.testing.assert_allclose(result.smoothed, posteriors, atol=1e-10)
    assert result.log_evidence == pytest.approx(log_evidence, abs=1e-9)
    log_best, states = reference.decode(observations[:, None], algorithm="viterbi")
    path, log_joint = exact.viterbi(model, observations)
    assert log_joint == pytest.approx(log_best, abs=1e-9)
    np.testing.assert_array_equal(path, model.joint_states[states])


def test_row_blocks_cover_the_matrix(monkeypatch):
    model = build(3, 3, seed=1, eps=0.2)
    monkeypatch.setattr(exact, "BLOCK_ENTRIES", 100)
    T = exact.JointTransition(model)
    assert len(T.blocks()) > 1
    np.testing.assert_allclose(np.vstack([T.rows(a, b) for a, b in T.blocks()]), definition(model))
    _, observations = model.sample(6, np.random.default_rng(0))
    path, log_joint = exact.viterbi(model, observations)
    monkeypatch.setattr(exact, "BLOCK_ENTRIES", 2**22)
    whole_path, whole_log_joint = exact.viterbi(model, observations)
    np.testing.assert_array_equal(path, whole_path)
    assert whole_log_joint == pytest.approx(log_joint, abs=1e-12)


def test_independent_chains_factorise():
    """eps = 0: the joint filtered and smoothed beliefs are products of each chain's own."""
    model = build(3, 3, seed=4, eps=0.0, n_observations=3)
    _, observations = model.sample(12, np.random.default_rng(5))
    observations[1::3] = -1
    result = exact.smoothing(model, observations)
    symbols = np.array([model.chain_symbols(o) if o >= 0 else [-1] * 3 for o in observations])
    filtered, log_evidence = [], 0.0
    for i in range(3):
        chain = filtering(HMM(model.priors[i], model.own[i], model.emissions[i]), symbols[:, i])
        filtered.append(chain.beliefs)
        log_evidence += chain.log_evidence
    product = np.einsum("ta,tb,tc->tabc", *filtered).reshape(len(observations), -1)
    np.testing.assert_allclose(result.filtered, product, atol=1e-12)
    assert result.log_evidence == pytest.approx(log_evidence, abs=1e-10)
    for mine, theirs in zip(exact.marginals(result.filtered, model.sizes), filtered, strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-12)
