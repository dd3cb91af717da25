"""State splitting: a model of 2n states from one of n, the evidence unchanged, blocked and
unblocked, for every parameterisation that can split; the noise that breaks the tie; Adam's
state split so that its steps on the copies are the original's."""

import numpy as np
import pytest

from pipeline.hmmlm import blocks as bm
from pipeline.hmmlm import evidence
from pipeline.hmmlm.clusters import blocks_of
from pipeline.hmmlm.parameters import initial, softmax_rows, transition_matrix
from pipeline.hmmlm.split import sources, split, split_adam
from pipeline.hmmlm.train import Adam, _leaves
from pipeline.operators import toarray

CLUSTER = np.array([0, 1, 2, 0, 1, 2, 1])
KINDS = {
    "softmax": ("softmax", {}),
    "kernel": ("kernel", {"n_features": 3, "dim": 2}),
    "neural": ("neural", {"dim": 3}),
}
STREAMS = np.random.default_rng(1).integers(0, 7, (3, 9))


def _model(name, n, emission_size=None):
    kind, params = KINDS[name]
    p = initial(kind, n, 7, seed=3, emission_size=emission_size, **params)
    return p._replace(prior=np.random.default_rng(5).standard_normal(n))


def test_the_copies_of_each_state():
    np.testing.assert_array_equal(sources(3, None), [0, 1, 2, 0, 1, 2])
    blocks = blocks_of(np.array([0, 1, 0]), 2)  # clusters of states {0, 1} and {2, 3}
    np.testing.assert_array_equal(sources(4, blocks), [0, 1, 0, 1, 2, 3, 2, 3])


@pytest.mark.parametrize("name", sorted(KINDS))
def test_splitting_leaves_the_unblocked_evidence_unchanged(name):
    p = _model(name, 4)
    grown, _ = split(p)

    def log_evidence(q):
        T = transition_matrix(q.transition)
        prior, emission = softmax_rows(q.prior), softmax_rows(q.emission)
        return evidence.log_evidence(prior, T, emission, STREAMS)[0]

    assert len(grown.prior) == 8
    assert log_evidence(grown) == pytest.approx(log_evidence(p), abs=1e-10)
    T = toarray(transition_matrix(grown.transition))
    np.testing.assert_allclose(T[:, :4], T[:, 4:], atol=1e-14)  # each copy: half the mass
    np.testing.assert_allclose(T[:, :4] * 2, T[:, :4] + T[:, 4:], atol=1e-14)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_splitting_leaves_the_blocked_evidence_unchanged(name):
    blocks = blocks_of(CLUSTER, 2)
    p = _model(name, 6, emission_size=2 * 7)
    grown, bigger = split(p, blocks)
    assert bigger.states == 4 and len(grown.prior) == 12 and grown.emission.size == 4 * 7
    before = bm.log_evidence(p, blocks, STREAMS, 4)
    assert bm.log_evidence(grown, bigger, STREAMS, 4) == pytest.approx(before, abs=1e-10)
    noisy, _ = split(p, blocks, noise=0.1, rng=np.random.default_rng(0))
    changed = bm.log_evidence(noisy, bigger, STREAMS, 4)
    assert changed != pytest.approx(before, abs=1e-6) and changed == pytest.approx(before, rel=0.05)


def test_a_banded_kernel_is_not_split():
    p = initial("kernel", 4, 7, n_features=2, dim=2, delta=2)
    with pytest.raises(ValueError, match="a banded kernel cannot be split"):
        split(p)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_adams_state_splits_as_the_gradient_does(name):
    """A copy's gradient is half its original's per state axis (a shared parameter's the
    same), so Adam's moments of the gradient ``g`` (``g``, ``g^2``), split, are those of
    the split model's gradient: each copy's step is its original's."""
    blocks = blocks_of(CLUSTER, 2)
    p = _model(name, 6, emission_size=2 * 7)
    grown, bigger = split(p, blocks)
    _, g, _ = bm.batch_gradient(p, blocks, STREAMS, bm.full(blocks, 0))
    _, expected, _ = bm.batch_gradient(grown, bigger, STREAMS, bm.full(bigger, 0))
    squared = type(g)(
        *(x**2 for x in _leaves(g)[:2]), type(g.transition)(*(x**2 for x in g.transition))
    )
    found = split_adam(Adam(g, squared, 7, 0.005), blocks)
    assert (found.step, found.rate) == (7, 0.005)
    for m, v, e in zip(_leaves(found.first), _leaves(found.second), _leaves(expected), strict=True):
        np.testing.assert_allclose(m, e, rtol=1e-7, atol=1e-12)
        np.testing.assert_allclose(v, e**2, rtol=1e-7, atol=1e-12)
