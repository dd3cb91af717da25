"""HMM LM training: the evidence against brute-force enumeration, every gradient against
finite differences, the kernel matrix against its formula, and training that learns."""

import copy
import itertools
import subprocess
import sys

import numpy as np
import pytest

from pipeline.hmmlm import train as training
from pipeline.hmmlm.clusters import blocks_of
from pipeline.hmmlm.evidence import statistics
from pipeline.hmmlm.parameters import (
    gradient,
    initial,
    softmax_in_place,
    softmax_rows,
    transition_matrix,
)
from pipeline.hmmlm.train import (
    Schedule,
    _clipped_scale,
    _leaves,
    _rebuild,
    _warm_up,
    perplexity,
    train,
)
from pipeline.inference import smoothing
from pipeline.operators import LowRank, toarray
from pipeline.testing.random_models import random_hmm

from helpers import brute_force_log_evidence, finite_difference_errors

KINDS = {
    "softmax": ("softmax", {}),
    "kernel": ("kernel", {"n_features": 3, "dim": 2}),
    "banded_kernel": ("kernel", {"n_features": 3, "dim": 2, "delta": 2}),
    "neural": ("neural", {"dim": 3}),
}


def _model(name, n=5, n_tokens=4, seed=3):
    kind, params = KINDS[name]
    p = initial(kind, n, n_tokens, seed=seed, **params)
    if kind == "kernel":  # band logits of order one, so the band matters
        band = np.random.default_rng(seed).standard_normal(p.transition.band.shape)
        p = p._replace(transition=p.transition._replace(band=band))
    return p


def _log_evidence(p, tokens):
    T = transition_matrix(p.transition)
    return statistics(softmax_rows(p.prior), T, softmax_rows(p.emission), tokens).log_evidence


@pytest.mark.parametrize("name", sorted(KINDS))
def test_log_evidence_equals_the_sum_over_all_paths(name):
    p = _model(name)
    tokens = np.random.default_rng(1).integers(0, 4, (2, 5))
    prior, emission = softmax_rows(p.prior), softmax_rows(p.emission)
    T = toarray(transition_matrix(p.transition))
    expected = brute_force_log_evidence(prior, T, emission, tokens)
    assert _log_evidence(p, tokens) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("carried", [False, True])
def test_the_training_recursion_is_pipeline_inferences_smoothing(carried):
    """The recursion training keeps (``pipeline.hmmlm.evidence`` says why) against
    ``pipeline.inference.smoothing`` of the same HMM: the evidence, the emission counts and
    the pair marginals of every transition, ``T * (before.T @ after)``; carried, each
    sequence starts with a transition from its carry, so smoothing starts from the carry
    moved one step."""
    hmm = random_hmm(3, 6, 4)
    T, E = hmm.transition, hmm.emission
    tokens = np.random.default_rng(4).integers(0, 4, (3, 9))
    carry = np.random.default_rng(5).dirichlet(np.ones(6), size=3) if carried else None
    s = statistics(hmm.prior, T, E, tokens, carry)
    if carried:  # each sequence from its own start: the carry moved one step
        reference = smoothing(hmm, tokens, initial=carry @ T, counts=True)
    else:
        reference = smoothing(hmm, tokens, counts=True)
    assert s.log_evidence == pytest.approx(reference.log_evidence.sum(), rel=1e-12)
    counts = np.zeros_like(E)
    for b, t in np.ndindex(tokens.shape):
        counts[:, tokens[b, t]] += reference.posteriors[b, t]
    np.testing.assert_allclose(s.emission_counts, counts, atol=1e-12)
    within = s.before.reshape(3, -1, 6), s.after.reshape(3, -1, 6)
    if carried:  # the first transition of each sequence is the one from the carry
        within = within[0][:, 1:], within[1][:, 1:]
    pairs = T * (within[0].reshape(-1, 6).T @ within[1].reshape(-1, 6))
    np.testing.assert_allclose(pairs, toarray(reference.transition_counts), atol=1e-12)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_gradient_equals_finite_differences(name):
    p = _model(name)
    tokens = np.random.default_rng(2).integers(0, 4, (2, 6))
    T = transition_matrix(p.transition)
    s = statistics(softmax_rows(p.prior), T, softmax_rows(p.emission), tokens)
    analytic = gradient(p, s, len(tokens))
    checked = 0
    for path, index, expected, numeric in finite_difference_errors(
        lambda q: _log_evidence(q, tokens), p, analytic, samples=7
    ):
        assert expected == pytest.approx(numeric, abs=1e-7), (path, index)
        checked += 1
    assert checked >= 20


def test_the_kernel_matrix_is_the_generalised_softmax_with_its_band():
    p = _model("banded_kernel", n=7).transition
    phi_u = np.exp(p.U @ p.W.T - 0.5 * (p.U**2).sum(axis=1, keepdims=True))
    phi_v = np.exp(p.V @ p.W.T - 0.5 * (p.V**2).sum(axis=1, keepdims=True))
    weights = phi_u @ phi_v.T
    for i, offset in itertools.product(range(7), range(-1, 2)):  # delta 2: offsets -1, 0, 1
        if 0 <= i + offset < 7:
            weights[i, i + offset] = np.exp(p.band[i, offset + 1])
    T = transition_matrix(p)
    assert isinstance(T, LowRank) and T.rank == 3
    np.testing.assert_allclose(toarray(T), weights / weights.sum(axis=1, keepdims=True))


def _sticky():
    """240 chunks of 24 tokens sampled from a sticky 4-state HMM over 6 words, and its
    transition and emission matrices."""
    rng = np.random.default_rng(0)
    T = np.full((4, 4), 0.1 / 3) + np.eye(4) * (0.9 - 0.1 / 3)
    E = np.array([[0.45, 0.45, 0.1 / 4, 0.1 / 4, 0.1 / 4, 0.1 / 4]] * 4)
    for k in range(4):
        E[k] = np.roll(E[k], 2 * k) if k < 3 else np.full(6, 1 / 6)
    sequences = np.empty((240, 24), dtype=np.int64)
    for b in range(240):
        state = rng.integers(4)
        for t in range(24):
            sequences[b, t] = rng.choice(6, p=E[state])
            state = rng.choice(4, p=T[state])
    return sequences, T, E


@pytest.mark.parametrize("name", ["softmax", "banded_kernel"])
def test_training_approaches_the_model_that_made_the_data(name):
    """Tokens sampled from a sticky 4-state HMM over 6 words: training from a random start
    brings the held-out perplexity from about 6 (uniform) most of the way to the truth's."""
    sequences, T, E = _sticky()
    train_part, held_out = sequences[:200].reshape(20, -1), sequences[200:]  # 20 streams
    kind, params = KINDS[name]
    p = initial(kind, 4, 6, seed=1, **{**params, "delta": 1 if name != "softmax" else 0})
    truth = (
        p._replace(prior=np.zeros(4), emission=np.log(E), transition=type(p.transition)(np.log(T)))
        if name == "softmax"
        else None
    )
    result = train(p, train_part, held_out, Schedule(15, length=24, learning_rate=0.05))
    assert result.perplexity.shape == (16,) and result.epoch_seconds.shape == (15,)
    assert result.perplexity[0] > 5.5
    assert result.perplexity[-1] < 0.8 * result.perplexity[0]
    if truth is not None:
        assert result.perplexity[-1] < 1.1 * perplexity(truth, held_out)


def test_a_decaying_rate_restores_the_best_epoch_where_a_constant_one_diverges():
    """At a rate too high for it (2.0, no clipping), a kernel's validation perplexity more
    than doubles in its first epoch and never comes back below the start's; with decay 0.25
    the worse epoch is undone and the rate cut, and training goes well below it."""
    sequences = _sticky()[0]
    runs = [
        train(
            initial("kernel", 4, 6, seed=1, n_features=4, dim=3, delta=1),
            sequences[:200].reshape(20, -1),
            sequences[200:],
            Schedule(10, length=24, learning_rate=2.0, decay=decay, clip=None),
        )
        for decay in (1.0, 0.25)
    ]
    constant, decayed = (run.perplexity for run in runs)
    assert np.array_equal(constant[:2], decayed[:2])  # the same until the first worse epoch
    assert constant[1] > 2 * constant[0] and constant[1:].min() > 0.9 * constant[0]
    assert decayed.min() < constant.min() - 0.5
    assert perplexity(runs[1].parameters, sequences[200:]) == pytest.approx(decayed.min())


def test_a_continued_model_goes_on_past_a_worse_first_epoch_and_never_ends_worse():
    """A model trained at a moderate rate, then carried on at a rate too high for it (2.0):
    its first epochs are worse than where it started. Without ``continued`` patience 2
    stops it there and returns the start; with it (a grown model's run) the epochs are
    compared with one another, so it goes on, and the result is the best validation model,
    the start included."""
    sequences = _sticky()[0]
    tokens, held_out = sequences[:200].reshape(20, -1), sequences[200:]
    p = initial("kernel", 4, 6, seed=1, n_features=4, dim=3, delta=1)
    trained = train(p, tokens, held_out, Schedule(10, length=24, learning_rate=0.1)).parameters
    schedule = Schedule(8, patience=2, length=24, learning_rate=2.0, decay=0.25, clip=None)
    plain = train(copy.deepcopy(trained), tokens, held_out, schedule)
    carried = train(copy.deepcopy(trained), tokens, held_out, schedule, continued=True)
    assert np.array_equal(plain.perplexity[:2], carried.perplexity[:2])
    assert plain.perplexity[1] > plain.perplexity[0]  # the first epoch is worse
    assert plain.stopped == "patience" and len(plain.epoch_seconds) == 2
    assert len(carried.epoch_seconds) > 2
    curve = carried.perplexity
    assert curve[carried.best_epoch] == curve.min() <= curve[0]
    assert perplexity(carried.parameters, held_out) == pytest.approx(curve.min())


def test_a_steps_gradient_norm_is_clipped():
    grads = [np.array([3.0, 0.0]), np.array([[0.0], [4.0]])]  # norm 5
    assert _clipped_scale(grads, 0.5, clip=None) == 0.5
    assert _clipped_scale(grads, 0.5, clip=10.0) == 0.5  # norm 2.5: kept
    assert _clipped_scale(grads, 0.5, clip=1.0) == pytest.approx(0.2)  # norm 2.5 -> 1
    assert _clipped_scale([np.zeros(3)], 0.5, clip=1.0) == 0.5


def test_training_does_not_import_the_model_families():
    """``pipeline.models.hmmlm`` reads saved HMM LMs through ``pipeline.hmmlm``; the other
    direction would be an import cycle."""
    code = (
        "import sys, pipeline.hmmlm.data, pipeline.hmmlm.train, pipeline.hmmlm.saved; "
        "print(sorted(m for m in sys.modules if m.startswith('pipeline.models')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_early_stopping_returns_the_model_of_the_best_validation_epoch():
    """A blocked model of 16 states on 8 chunks of noise overfits within a few epochs."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 8, (16, 12))
    blocks = blocks_of(np.arange(8) % 2, 8)
    p = initial("softmax", 16, 8, seed=0, emission_size=8 * 8, dtype=np.float32)
    result = train(
        p, tokens[:8].reshape(4, -1), tokens[8:],
        Schedule(40, patience=2, length=12, learning_rate=0.3), blocks=blocks, state_dropout=0.25,
    )  # fmt: skip
    curve, best = result.perplexity, result.best_epoch
    assert 1 <= best and len(curve) == best + 3 < 41  # stopped two epochs after the best
    assert result.stopped == "patience"
    assert curve[best] == curve.min() and (curve[best + 1 :] >= curve[best]).all()
    assert perplexity(result.parameters, tokens[8:], blocks) == pytest.approx(curve[best], rel=1e-6)


def test_a_time_budget_stops_before_an_epoch_that_would_pass_it():
    sequences = _sticky()[0]
    p = initial("softmax", 4, 6, seed=1)
    result = train(p, sequences[:40].reshape(4, -1), sequences[200:], Schedule(5, max_seconds=1e-9))
    assert result.stopped == "budget" and len(result.epoch_seconds) == 1  # one epoch always


@pytest.mark.parametrize("blocked", [False, True])
def test_the_warm_up_before_the_timed_epochs_changes_nothing(blocked, monkeypatch):
    """``train`` first runs two segments' gradients and an Adam step untimed: the model's
    arrays keep every bit, and training ends as it does without the warm-up, bit for bit
    (a blocked model's state dropout draws from a generator of its own)."""
    tokens = np.random.default_rng(0).integers(0, 8, (16, 24))
    blocks = blocks_of(np.arange(8) % 2, 8) if blocked else None
    dtype = np.float32 if blocked else np.float64
    start = initial("softmax", 16, 8, seed=0, emission_size=8 * 8 if blocked else None, dtype=dtype)
    leaves = [x.copy() for x in _leaves(start)]
    _warm_up(start, tokens[:8], blocks, 0.25 if blocked else 0.0, 12, 0.3)
    assert all(np.array_equal(a, b) for a, b in zip(leaves, _leaves(start), strict=True))

    def trained():
        p = _rebuild(start, [x.copy() for x in leaves])
        schedule = Schedule(2, length=12, learning_rate=0.3)
        dropout = 0.25 if blocked else 0.0
        return train(p, tokens[:8], tokens[8:], schedule, blocks=blocks, state_dropout=dropout)

    warmed = trained()
    monkeypatch.setattr(training, "_warm_up", lambda *arguments: None)
    cold = trained()
    assert np.array_equal(warmed.perplexity, cold.perplexity)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(_leaves(warmed.parameters), _leaves(cold.parameters), strict=True)
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_in_place_softmax_is_each_rows_softmax(dtype):
    """The full softmax's transitions, made in place, against each row's softmax in float64,
    to the rounding of the dtype (float32's ``x - max`` rounds by ``|x - max| eps``, up to
    30 eps here); the array itself is the result."""
    logits = (5 * np.random.default_rng(2).standard_normal((7, 300))).astype(dtype)
    expected = softmax_rows(logits.astype(np.float64))
    result = softmax_in_place(logits)
    assert result is logits and result.dtype == dtype
    np.testing.assert_allclose(result, expected, rtol=1e-5 if dtype == np.float32 else 1e-14)
