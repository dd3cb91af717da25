"""Training HMM LMs by gradient ascent on the evidence, to convergence on validation.

Adam (Kingma and Ba) on every parameter, with the gradient of the summed log evidence of
a batch of chunks divided by its tokens: the same optimiser for every parameterisation,
so epochs compare like with like. After every epoch the validation perplexity is
measured; after ``patience`` epochs in a row without a better one (or ``max_epochs`` in
all) training stops, and the result is the model of the best validation epoch. The
learning rate stays constant by default: halving it whenever validation does not improve
(tried) stalls training on plateaus that a constant rate leaves (``tests/hmmlm``: a sticky
4-state HMM whose 15-epoch perplexity stays at 5.48-5.50 with halving, 5.00 at a
constant rate, 4.90 for the true model). Large kernel models can diverge at a rate that
serves their first epoch (``docs/lm``), so a schedule may ``decay``: after an epoch
without a better validation perplexity the best epoch's parameters come back, Adam
restarts and the rate is multiplied by ``decay``.

A blocked model (``blocks`` given, ``pipeline.hmmlm.blocks``) may train with state
dropout: each batch keeps a random ``1 - state_dropout`` of every cluster's states (at
least one) and trains that sub-model; validation and test use the whole model.
"""

from __future__ import annotations

import time
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


class Trained(NamedTuple):
    """A training run's result.

    parameters : the parameters after the best validation epoch.
    perplexity : (epochs run + 1,) validation perplexity before training and after each epoch.
    epoch_seconds : (epochs run,) wall-clock seconds of each epoch's updates.
    best_epoch : the epoch of the lowest validation perplexity (0: none improved on the start).
    training_bytes : bytes of the parameters, their two Adam moments, the best epoch's copy
        and the per-batch buffers.
    """

    parameters: Parameters
    perplexity: np.ndarray
    epoch_seconds: np.ndarray
    best_epoch: int
    training_bytes: int


class Schedule(NamedTuple):
    """How long and how fast: at most ``max_epochs``; stop after ``patience`` epochs in a
    row without a better validation perplexity (None: never early); the rate, multiplied by
    ``decay`` (and the best epoch's parameters restored) after each such epoch (1: a
    constant rate)."""

    max_epochs: int
    patience: int | None = None
    batch: int = 32
    learning_rate: float = 0.05
    decay: float = 1.0


def _leaves(tree) -> list[np.ndarray]:
    if isinstance(tree, tuple):
        return [leaf for child in tree for leaf in _leaves(child)]
    return [tree]


def _rebuild(tree, leaves: list[np.ndarray]):
    """``tree`` with its arrays replaced, in ``_leaves`` order (consumes ``leaves``)."""
    if isinstance(tree, tuple):
        return type(tree)(*(_rebuild(child, leaves) for child in tree))
    return leaves.pop(0)


@numba.njit(cache=True, nogil=True, fastmath=True)
def _adam(x, g, m, v, rate, scale, beta1, beta2, corrected1, corrected2):
    """One Adam ascent step on the flat arrays (in place): ``g`` is the gradient times
    ``scale``; ``corrected1, corrected2 = 1 - beta^step``."""
    for i in range(x.size):
        gi = g[i] * scale
        m[i] = beta1 * m[i] + (1 - beta1) * gi
        v[i] = beta2 * v[i] + (1 - beta2) * gi * gi
        x[i] += rate * (m[i] / corrected1) / (np.sqrt(v[i] / corrected2) + 1e-8)


def log_evidence(p: Parameters, chunks: np.ndarray, blocks: Blocks | None = None, batch=64):
    """``sum log P(chunk)`` over the rows of ``chunks`` (M, length), ``batch`` rows at a time."""
    if blocks is not None:
        return blocked_model.log_evidence(p, blocks, chunks, batch)
    prior, emission = softmax_rows(p.prior), softmax_rows(p.emission)
    T = transition_matrix(p.transition)
    return sum(
        evidence.log_evidence(prior, T, emission, chunks[k : k + batch])
        for k in range(0, len(chunks), batch)
    )


def perplexity(p: Parameters, chunks: np.ndarray, blocks: Blocks | None = None) -> float:
    """``exp(-log evidence / tokens)`` of ``chunks``: each chunk starts from the prior."""
    return float(np.exp(-log_evidence(p, chunks, blocks) / chunks.size))


def _batch_gradient(p, tokens, blocks, state_dropout, rng, work) -> Parameters:
    if blocks is None:
        prior, emission = softmax_rows(p.prior), softmax_rows(p.emission)
        T = transition_matrix(p.transition)
        return gradient(p, statistics(prior, T, emission, tokens), len(tokens))
    width = p.transition.band.shape[1] if isinstance(p.transition, Kernel) else 0
    kept = blocked_model.kept_states(blocks, state_dropout, rng)
    r = blocked_model.restriction(blocks, kept, width)
    return blocked_model.batch_gradient(p, blocks, tokens, r, work)[1]


def train(
    p: Parameters,
    train_chunks: np.ndarray,
    validation: np.ndarray,
    schedule: Schedule,
    *,
    blocks: Blocks | None = None,
    state_dropout: float = 0.0,
    seed: int = 0,
) -> Trained:
    """Adam over ``train_chunks`` (M, length) in shuffled batches of ``schedule.batch``
    chunks, epoch after epoch until ``schedule`` stops; the validation perplexity after
    each. ``p``'s arrays are updated in place (the best epoch's are copied out)."""
    rng = np.random.default_rng(seed)
    leaves = _leaves(p)
    first, second = [np.zeros_like(x) for x in leaves], [np.zeros_like(x) for x in leaves]
    work = Workspace()
    step, stale, rate = 0, 0, schedule.learning_rate
    curve, seconds = [perplexity(p, validation, blocks)], []
    best, best_epoch = [x.copy() for x in leaves], 0
    while len(seconds) < schedule.max_epochs:
        start = time.perf_counter()
        order = rng.permutation(len(train_chunks))
        for k in range(0, len(order), schedule.batch):
            tokens = train_chunks[order[k : k + schedule.batch]]
            grads = _leaves(_batch_gradient(p, tokens, blocks, state_dropout, rng, work))
            step += 1
            for x, g, m, v in zip(leaves, grads, first, second, strict=True):
                corrected = (1 - 0.9**step, 1 - 0.999**step)
                _adam(x.ravel(), g.ravel(), m.ravel(), v.ravel(), rate,
                      1.0 / tokens.size, 0.9, 0.999, *corrected)  # fmt: skip
        seconds.append(time.perf_counter() - start)
        curve.append(perplexity(p, validation, blocks))
        if curve[-1] < min(curve[:-1]):
            best, best_epoch, stale = [x.copy() for x in leaves], len(seconds), 0
        else:
            stale += 1
            if schedule.patience is not None and stale >= schedule.patience:
                break
            if schedule.decay < 1:  # back to the best epoch, more slowly
                for x, b, m, v in zip(leaves, best, first, second, strict=True):
                    x[...], m[...], v[...] = b, 0, 0
                step, rate = 0, rate * schedule.decay
    held = 4 * sum(x.nbytes for x in leaves) + work.nbytes  # x, m, v and the best copy
    return Trained(_rebuild(p, best), np.array(curve), np.array(seconds), best_epoch, held)
