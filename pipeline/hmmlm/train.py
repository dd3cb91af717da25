"""Training HMM LMs by gradient ascent on the evidence, to convergence on validation.

The recipe of Chiu and Rush (harvardnlp/hmm-lm, ``scripts/hmm_commands.sh``): the
training tokens as ``B`` parallel streams, each cut into segments of ``length`` tokens;
a batch is one segment of every stream, and each stream's state is carried from one
segment to the next (``pipeline.hmmlm.blocked``: the next segment starts from the last
belief, the gradient stopped there), so a batch of B x length tokens is one small step
and an epoch is many. Adam (Kingma and Ba) on every parameter, on the gradient of the
summed log evidence of a batch divided by its tokens, its norm clipped at ``clip``: the
same optimiser for every parameterisation, so epochs compare like with like.

After every epoch the validation perplexity is measured (each validation stream from
the prior, its state carried throughout). After ``decay_patience`` epochs in a row
without a better one the rate is multiplied by ``decay`` and the best epoch's parameters
come back (Adam restarted): at a rate that serves their first epochs, large models can
diverge (``reports/lm``). Training stops after ``patience`` epochs in a row without a better
one, after ``max_epochs``, or before an epoch that would end past ``max_seconds`` of
training (as long as the last epoch took); the result is the model of the best
validation epoch.

A run may continue a trained model (``continued``: a grown one, every state of a trained
model split in two, its evidence unchanged), from the Adam state its training was left in
(``adam``: the moments split with the states, ``pipeline.hmmlm.split.split_adam``; a run
returns its own in ``Trained.adam``). Its first epochs leave it worse than where it
started (the copies' tie breaks, and the rate that trains a random start moves every
parameter far: at 2^13 states a kernel's validation perplexity went from 145.3 to 154.6 in
its first epoch at the rate 0.02 from Adam's zero state, 153.7 from its split state; at
0.005, 148.2 and 147.6), so stopping and the rate's decay compare the trained epochs with
one another, not with the start; the result is still the best validation model, the start
included, so a continued model never ends worse than it began.

A blocked model (``blocks`` given, ``pipeline.hmmlm.blocks``) may train with state
dropout: each batch keeps a random ``1 - state_dropout`` of every cluster's states (at
least one) and trains that sub-model; validation and test use the whole model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import numba
import numpy as np

from pipeline.hmmlm import blocks as blocked_model
from pipeline.hmmlm import evidence
from pipeline.hmmlm.clusters import Blocks
from pipeline.hmmlm.evidence import statistics
from pipeline.hmmlm.parameters import (
    Kernel,
    Parameters,
    gradient,
    softmax_rows,
    transition_matrix,
)
from pipeline.hmmlm.workspace import Workspace

STOPS = ("patience", "max_epochs", "budget")
"""Why training stopped: ``patience`` epochs without a better validation perplexity,
``max_epochs``, or the next epoch would have ended past ``max_seconds``."""
EVALUATION_LENGTH = 256
"""Tokens per segment when the evidence of held-out streams is measured (the state is
carried between segments, so it decides the memory, not the value)."""


class Adam(NamedTuple):
    """Adam's state after some steps: where a run may carry on from.

    Attributes
    ----------
    first, second
        the first and second moments of every parameter (each a tree of arrays shaped as
        the parameters).
    step
        the steps taken since the moments were last zero (their bias correction).
    rate
        the learning rate the steps were taken at.
    """

    first: Parameters
    second: Parameters
    step: int
    rate: float


class Trained(NamedTuple):
    """A training run's result.

    Attributes
    ----------
    parameters
        the parameters after the best validation epoch.
    perplexity
        (epochs run + 1,) validation perplexity before training and after each epoch.
    epoch_seconds
        (epochs run,) wall-clock seconds of each epoch's updates.
    best_epoch
        the epoch of the lowest validation perplexity (0: none improved on the start).
    training_bytes
        bytes of the parameters, their two Adam moments, the best epoch's copy of all
        three (and a continued run's start) and the per-batch buffers.
    stopped
        why training stopped, one of ``STOPS``.
    adam
        Adam's state after the best validation epoch (the one given for epoch 0).
    """

    parameters: Parameters
    perplexity: np.ndarray
    epoch_seconds: np.ndarray
    best_epoch: int
    training_bytes: int
    stopped: str
    adam: Adam


class Schedule(NamedTuple):
    """How long and how fast (the module's docstring).

    Attributes
    ----------
    max_epochs
        epochs at most.
    patience
        stop after this many epochs in a row without a better validation
        perplexity (None: never early).
    length
        tokens per segment (a batch is one segment of every stream).
    learning_rate
        Adam's rate at the start.
    decay
        the rate's factor after ``decay_patience`` epochs without a better validation
        perplexity, the best epoch's parameters restored (1: a constant rate, nothing
        restored).
    decay_patience
        epochs in a row without a better validation perplexity before each
        decay.
    clip
        the largest norm of a step's gradient (per token); None: no clipping.
    max_seconds
        seconds of training (updates and validation) not to go past; None: none.
    """

    max_epochs: int
    patience: int | None = None
    length: int = 32
    learning_rate: float = 0.01
    decay: float = 1.0
    decay_patience: int = 1
    clip: float | None = 5.0
    max_seconds: float | None = None


def _leaves(tree) -> list[np.ndarray]:
    if isinstance(tree, tuple):
        return [leaf for child in tree for leaf in _leaves(child)]
    return [tree]


def _rebuild(tree, leaves: list[np.ndarray]):
    """``tree`` with its arrays replaced, in ``_leaves`` order (consumes ``leaves``)."""
    if isinstance(tree, tuple):
        return type(tree)(*(_rebuild(child, leaves) for child in tree))
    return leaves.pop(0)


@numba.njit(cache=True, nogil=True, fastmath=True, parallel=True)
def _adam(x, g, m, v, rate, scale, beta1, beta2, corrected1, corrected2):
    """One Adam ascent step on the flat arrays (in place): ``g`` is the gradient times
    ``scale``; ``corrected1, corrected2 = 1 - beta^step``. Each entry on its own, the
    entries across the threads."""
    for i in numba.prange(x.size):
        gi = g[i] * scale
        m[i] = beta1 * m[i] + (1 - beta1) * gi
        v[i] = beta2 * v[i] + (1 - beta2) * gi * gi
        x[i] += rate * (m[i] / corrected1) / (np.sqrt(v[i] / corrected2) + 1e-8)


def log_evidence(p: Parameters, streams: np.ndarray, blocks: Blocks | None = None) -> float:
    """``sum log P(stream)`` over the rows of ``streams`` (S, L), each from the prior."""
    if blocks is not None:
        return blocked_model.log_evidence(p, blocks, streams, EVALUATION_LENGTH)
    prior, emission = softmax_rows(p.prior), softmax_rows(p.emission)
    return evidence.log_evidence(prior, transition_matrix(p.transition), emission, streams)[0]


def perplexity(p: Parameters, streams: np.ndarray, blocks: Blocks | None = None) -> float:
    """``exp(-log evidence / tokens)`` of ``streams`` (S, L): each stream from the prior."""
    return float(np.exp(-log_evidence(p, streams, blocks) / streams.size))


def _sub_models(
    p: Parameters, blocks: Blocks | None, state_dropout: float, rng: np.random.Generator
) -> Callable[[], blocked_model.Restriction | None]:
    """What gives each batch's sub-model (``pipeline.hmmlm.blocks``): without state dropout
    the whole model's restriction, made once; with it a random one each call; None for an
    unblocked model."""
    if blocks is None:
        return lambda: None
    width = p.transition.band.shape[1] if isinstance(p.transition, Kernel) else 0
    if not state_dropout:
        whole = blocked_model.full(blocks, width)
        return lambda: whole
    return lambda: blocked_model.restriction(
        blocks, blocked_model.kept_states(blocks, state_dropout, rng), width
    )


def _batch_gradient(p, tokens, blocks, r, work, carry, previous):
    """``(gradient, last beliefs)`` of one segment of every stream, under the sub-model
    ``r`` of a blocked model (None: unblocked)."""
    if blocks is None:
        prior, emission = softmax_rows(p.prior), softmax_rows(p.emission)
        T = transition_matrix(p.transition)
        s = statistics(prior, T, emission, tokens, carry)
        return gradient(p, s, len(tokens) if carry is None else 0), s.last
    _, grad, last = blocked_model.batch_gradient(
        p, blocks, tokens, r, work, carry=carry, previous=previous
    )
    return grad, last


def _clipped_scale(grads: list[np.ndarray], scale: float, clip: float | None) -> float:
    """``scale``, reduced so that the norm of ``scale * grads`` is at most ``clip``."""
    if clip is None:
        return scale
    norm = scale * np.sqrt(sum(float(np.vdot(g, g)) for g in grads))
    return scale * min(1.0, clip / norm) if norm > 0 else scale


def _warm_up(p, streams, blocks, state_dropout, length: int, learning_rate: float) -> None:
    """What an epoch's first steps compile and touch first, done untimed with nothing kept
    (``pipeline.sweep.timing``): the gradients of the first two segments of ``streams``
    (B, L) (the second carries the first's state) and an Adam step on scratch copies of one
    number of every array. ``p`` is not changed and state dropout draws from a generator of
    its own, so training computes what it would have without it."""
    work, carry, previous, grad = Workspace(), None, None, None
    sub_model = _sub_models(p, blocks, state_dropout, np.random.default_rng(0))
    for lo in range(0, min(streams.shape[1], 2 * length), length):
        tokens = streams[:, lo : lo + length]
        grad, carry = _batch_gradient(p, tokens, blocks, sub_model(), work, carry, previous)
        previous = tokens[:, -1]
    if grad is None:  # no tokens: no step to warm
        return
    for x, g in zip(_leaves(p), _leaves(grad), strict=True):
        x, g = x.ravel()[:1].copy(), g.ravel()[:1].copy()
        _adam(x, g, np.zeros_like(x), np.zeros_like(x), learning_rate, 1.0, 0.9, 0.999, 0.1, 0.001)


def train(
    p: Parameters,
    train_streams: np.ndarray,
    validation: np.ndarray,
    schedule: Schedule,
    *,
    blocks: Blocks | None = None,
    state_dropout: float = 0.0,
    seed: int = 0,
    on_epoch: Callable[[int, float], None] | None = None,
    continued: bool = False,
    adam: Adam | None = None,
) -> Trained:
    """Adam over the segments of ``train_streams`` (B, L), each stream's state carried
    from segment to segment, epoch after epoch until ``schedule`` stops; the validation
    perplexity of ``validation`` (S, L') after each. ``p``'s arrays are updated in place
    (the best epoch's are copied out). Epochs are timed after an untimed warm-up step
    (``_warm_up``), outside ``max_seconds``. ``on_epoch(epoch, perplexity)`` is called after
    each epoch (1, 2, ...) with its validation perplexity, outside the epoch's time.
    ``continued``: ``p`` carries on a trained model (the module's docstring); ``adam``: with
    the moments and step count of Adam's state (shaped as ``p``; copied), at the schedule's
    rate, instead of zero moments."""
    _warm_up(p, train_streams, blocks, state_dropout, schedule.length, schedule.learning_rate)
    sub_model = _sub_models(p, blocks, state_dropout, np.random.default_rng(seed))
    leaves = _leaves(p)
    if adam is None:
        first, second = [np.zeros_like(x) for x in leaves], [np.zeros_like(x) for x in leaves]
    else:
        first = [m.astype(x.dtype) for x, m in zip(leaves, _leaves(adam.first), strict=True)]
        second = [v.astype(x.dtype) for x, v in zip(leaves, _leaves(adam.second), strict=True)]
    work = Workspace()
    step, stale, rate, stopped = adam.step if adam else 0, 0, schedule.learning_rate, "max_epochs"
    began = time.perf_counter()
    curve, wall = [perplexity(p, validation, blocks)], 0.0
    seconds: list[float] = []
    best, best_epoch = [x.copy() for x in leaves], 0
    kept: Adam | None = None  # Adam's state after the best epoch; None: the start's
    starting = best if continued else None  # the start, kept apart from the trained epochs'
    compared = 1 if continued else 0  # the first epoch that stopping and the decay compare
    while len(seconds) < schedule.max_epochs:
        spent = time.perf_counter() - began
        if schedule.max_seconds is not None and seconds and spent + wall > schedule.max_seconds:
            stopped = "budget"
            break
        start = time.perf_counter()
        carry, previous = None, None
        for lo in range(0, train_streams.shape[1], schedule.length):
            tokens = train_streams[:, lo : lo + schedule.length]
            grad, carry = _batch_gradient(p, tokens, blocks, sub_model(), work, carry, previous)
            previous, grads = tokens[:, -1], _leaves(grad)
            scale = _clipped_scale(grads, 1.0 / tokens.size, schedule.clip)
            step += 1
            for x, g, m, v in zip(leaves, grads, first, second, strict=True):
                corrected = (1 - 0.9**step, 1 - 0.999**step)
                _adam(x.ravel(), g.ravel(), m.ravel(), v.ravel(), rate, scale, 0.9, 0.999,
                      *corrected)  # fmt: skip
        seconds.append(time.perf_counter() - start)
        curve.append(perplexity(p, validation, blocks))
        wall = time.perf_counter() - start  # the epoch's updates and its validation
        if on_epoch is not None:
            on_epoch(len(seconds), float(curve[-1]))
        if curve[-1] < min(curve[compared:-1], default=np.inf):
            best, best_epoch, stale = [x.copy() for x in leaves], len(seconds), 0
            kept = Adam(_rebuild(p, [m.copy() for m in first]),
                        _rebuild(p, [v.copy() for v in second]), step, rate)  # fmt: skip
            continue
        stale += 1
        if schedule.patience is not None and stale >= schedule.patience:
            stopped = "patience"
            break
        if schedule.decay < 1 and stale % schedule.decay_patience == 0:
            for x, b, m, v in zip(leaves, best, first, second, strict=True):
                x[...], m[...], v[...] = b, 0, 0
            step, rate = 0, rate * schedule.decay
    copies = 7 if continued else 6  # x, m, v, the best epoch's x, m, v (and the start's x)
    held = copies * sum(x.nbytes for x in leaves) + work.nbytes
    if starting is not None and curve[0] <= curve[best_epoch]:
        best, best_epoch, kept = starting, 0, None
    if kept is None:
        zeros = _rebuild(p, [np.zeros_like(x) for x in leaves])
        kept = adam or Adam(zeros, zeros, 0, schedule.learning_rate)
    return Trained(
        _rebuild(p, best), np.array(curve), np.array(seconds), best_epoch, held, stopped, kept
    )
