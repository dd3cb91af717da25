"""The coupled HMM container and the coupled family."""

import numpy as np
import pytest

from pipeline.coupled.family import build
from pipeline.coupled.model import CoupledHMM


def test_family_is_seeded_and_its_coupling_only_mixes():
    a, b = build(3, 4, seed=1, eps=0.0), build(3, 4, seed=1, eps=0.3)
    for x, y in zip(a.own, b.own, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(b.weights, [[0.7, 0.15, 0.15], [0.15, 0.7, 0.15], [0.15, 0.15, 0.7]])
    assert not np.array_equal(build(3, 4, seed=2).own[0], a.own[0])
    states = np.array([[0, 1, 2], [3, 3, 0]])
    # P(x'_0 | x) = 0.7 A_0[x_0] + 0.15 (B_01[x_1] + B_02[x_2])
    expected = 0.7 * b.own[0][states[:, 0]] + 0.15 * (
        b.pairs[0][1][0][states[:, 1]] + b.pairs[0][2][0][states[:, 2]]
    )
    np.testing.assert_allclose(b.conditional(0, states), expected)


@pytest.mark.parametrize("observe", ["chain", "set"])
def test_log_joint_is_the_joint_hmm_path_probability(observe):
    model = build(2, 3, seed=0, eps=0.4, n_observations=3, observe=observe)
    hmm = model.joint()
    paths, observations = model.sample(6, np.random.default_rng(0))
    observations[3] = -1
    index = np.ravel_multi_index(tuple(paths.T), model.sizes)
    expected = np.log(hmm.prior[index[0]]) + np.log(hmm.transition[index[:-1], index[1:]]).sum()
    seen = observations >= 0
    expected += np.log(hmm.emission[index[seen], observations[seen]]).sum()
    assert model.log_joint(paths, observations) == pytest.approx(expected)


def test_set_observation_is_the_set_of_symbols():
    model = build(3, 2, seed=0, n_observations=4, observe="set")
    assert model.joint_symbol(np.array([1, 3, 1])) == 0b1010
    assert model.n_observations == 16
    # P({0} | x) is the probability that every chain emits symbol 0.
    states = np.array([[1, 0, 1]])
    expected = np.prod([model.emissions[i][states[0, i], 0] for i in range(3)])
    assert model.likelihood(0b0001, states)[0] == pytest.approx(expected)


def test_samples_follow_the_joint_chain():
    model = build(2, 2, seed=3, eps=0.5, n_observations=2)
    rng = np.random.default_rng(0)
    counts = np.zeros((4, 4))
    for _ in range(4000):
        paths, _ = model.sample(2, rng)
        a, b = np.ravel_multi_index(tuple(paths.T), model.sizes)
        counts[a, b] += 1
    expected = model.joint().prior[:, None] * model.joint().transition * 4000
    assert np.abs(counts - expected).max() < 5 * np.sqrt(expected.max())


def test_bad_models_are_one_line_errors():
    good = build(2, 2, seed=0, eps=0.2)
    with pytest.raises(ValueError, match=r"^own\[1\] row \(0,\) sums to"):
        CoupledHMM(
            good.priors, good.weights, (good.own[0], good.own[1] * 2), good.pairs, good.emissions
        )
    with pytest.raises(ValueError, match=r"^weights has shape \(3, 3\); with 2 chains"):
        CoupledHMM(good.priors, np.eye(3), good.own, good.pairs, good.emissions)
    with pytest.raises(ValueError, match=r"^pairs\[0\]\[1\] has shape None"):
        CoupledHMM(
            good.priors, good.weights, good.own, ((None, None), good.pairs[1]), good.emissions
        )
    with pytest.raises(ValueError, match="observe='both' is not allowed; allowed: chain, set"):
        build(2, 2, observe="both")
    with pytest.raises(ValueError, match=r"eps must be in \[0, 1\]"):
        build(2, 2, eps=1.5)
