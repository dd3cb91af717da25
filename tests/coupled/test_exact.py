"""Exact inference on the joint chain against the definition, brute force and hmmlearn."""

import itertools

import numpy as np
import pytest
import yaml
from hmmlearn.hmm import CategoricalHMM
from inference import brute_force

from pipeline.coupled import exact
from pipeline.coupled.family import build
from pipeline.coupled.model import CoupledHMM
from pipeline.coupled.relational import ground
from pipeline.inference import filtering, smoothing, viterbi
from pipeline.models import HMM
from pipeline.operators import compiled, max_product
from pipeline.sweep.config import CONFIG_DIR

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
    found, expected = T.max_product(values), max_product(dense, values)
    np.testing.assert_allclose(found.values, expected.values, rtol=1e-14)
    np.testing.assert_array_equal(found.states, expected.states)
    assert not compiled(T)  # a step operator: the recursions step it in Python


@pytest.mark.parametrize("model", list(models()), ids=lambda m: f"{m.sizes}-{m.observe}")
def test_smoothing_and_viterbi_against_enumeration(model):
    """Against every joint path (``inference/brute_force.py``, the oracle of every
    recursion), to 1e-12."""
    _, observations = model.sample(4, np.random.default_rng(2))
    observations[2] = -1
    hmm = model.joint()
    logs = brute_force.symbol_log_likelihoods(hmm.emission, observations)
    marginals, log_evidence, _ = brute_force.smoothing(hmm.prior, hmm.transition, logs)
    best, log_best = brute_force.viterbi(hmm.prior, hmm.transition, logs)
    result = exact.smoothing(model, observations)
    np.testing.assert_allclose(result.smoothed, marginals, atol=1e-12)
    np.testing.assert_allclose(result.filtered, filtering(hmm, observations).beliefs, atol=1e-12)
    np.testing.assert_allclose(
        result.filtered, brute_force.filtering(hmm.prior, hmm.transition, logs), atol=1e-12
    )
    assert result.log_evidence == pytest.approx(log_evidence, abs=1e-12)
    path, log_joint = exact.viterbi(model, observations)
    assert log_joint == pytest.approx(log_best, abs=1e-12)
    np.testing.assert_array_equal(path, model.joint_states[best])
    assert model.log_joint(path, observations) == pytest.approx(log_joint, abs=1e-12)


def test_among_equally_probable_paths_viterbi_picks_pipeline_inferences():
    """The string quartet's joint chain has many equally probable paths: the exact Viterbi
    path is the one ``pipeline.inference.viterbi`` picks on the joint HMM (the same recursion
    and tie rule), not merely one as probable."""
    spec = yaml.safe_load((CONFIG_DIR / "relational" / "string_quartet.yaml").read_text())
    model = ground(spec, eps=0.0, domain={"voice": ["basso", "soprano"], "octave": [1]}).model
    _, observations = model.sample(30, np.random.default_rng(0))
    observations[np.arange(30) % 4 != 0] = -1
    path, log_joint = exact.viterbi(model, observations)
    reference = viterbi(model.joint(), observations)
    np.testing.assert_array_equal(path, model.joint_states[reference.path])
    assert log_joint == reference.log_probability


def test_an_impossible_observation_is_the_inference_convention():
    """Chain 0 stays in state 0, which never emits symbol 1: observing it at step 2 keeps the
    predicted belief, lists the step and makes the evidence -inf, as ``pipeline.inference``
    does on the joint HMM; Viterbi lists it too."""
    stay, mute = np.eye(2), np.array([[1.0, 0.0], [0.0, 1.0]])
    model = CoupledHMM(
        priors=(np.array([1.0, 0.0]), np.array([0.5, 0.5])),
        weights=np.eye(2),
        own=(stay, np.array([[0.7, 0.3], [0.4, 0.6]])),
        pairs=((None, None), (None, None)),
        emissions=(mute, np.array([[0.8, 0.2], [0.3, 0.7]])),
    )
    symbols = np.array([[0, 0], [0, 1], [1, 0], [0, 1]])
    observations = model.joint_symbol(symbols)
    result = exact.smoothing(model, observations)
    reference = smoothing(model.joint(), observations)
    assert result.log_evidence == reference.log_evidence == -np.inf
    np.testing.assert_array_equal(result.zero_evidence, [2])
    np.testing.assert_array_equal(reference.zero_evidence, [2])
    np.testing.assert_allclose(result.smoothed, reference.posteriors, atol=1e-14)
    assert np.isfinite(result.filtered).all()
    predicted = result.filtered[1] @ model.joint().transition
    np.testing.assert_allclose(result.filtered[2], predicted, rtol=1e-14)  # kept as it was
    path, log_joint = exact.viterbi(model, observations)
    decoded = viterbi(model.joint(), observations)
    assert log_joint == decoded.log_probability == -np.inf
    np.testing.assert_array_equal(path, model.joint_states[decoded.path])


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
