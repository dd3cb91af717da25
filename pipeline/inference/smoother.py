"""Smoothing: the posterior of every step given the whole sequence, by forward-backward.

The forward half is the filtering recursion itself (``pipeline.kernels.forward.forward``:
the filtered beliefs are ``filtering``'s to the last bit); the backward half
(``pipeline.kernels.backward.backward``) takes the backward step of the same layout, a
product with ``T`` where the forward step is one with ``T.T``, and turns each filtered
belief into the posterior in place. Both halves rescale every message, so they stay finite
over any horizon.

``smoothing`` returns every step's posterior (memory: the posteriors and O(n) more).
``smoothing_chunks`` hands them out a segment at a time, latest first, from filtered beliefs
kept every ``k`` steps (checkpoints) and recomputed in between: memory of about
``(T / k + k) n`` values, O(n sqrt(T)) for ``k = sqrt(T)``, for models whose posteriors
over the horizon do not fit in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference.forward import broadcast
from pipeline.inference.inputs import Evidence, read_evidence, read_initial, read_segments
from pipeline.kernels import backward, forward
from pipeline.operators import Matrix, expected_counts

NO_PRUNING = np.inf
"""The forward recursion's prune target that keeps every state."""


class SmoothResult(NamedTuple):
    """The result of ``smoothing`` one sequence of T steps.

    posteriors : ndarray, shape (T, n_states)
        ``posteriors[t] = P(S_t | o_0..o_{T-1})``.
    log_evidence : float
        ``log P(o_0..o_{T-1})``; ``-inf`` when some observation had zero probability.
    zero_evidence : ndarray of int
        The steps whose observation had zero probability: they count as unobserved, in the
        forward and the backward half alike.
    transition_counts : matrix of shape (n_states, n_states), or None
        With ``counts=True``, the expected transition counts
        ``sum_t P(S_t = i, S_{t+1} = j | o_0..o_{T-1})`` (``pipeline.operators.
        expected_counts``: an ndarray for a dense transition matrix, a ``csr_array`` on the
        stored entries of a CSR one, a ``LowRank`` for the factored formats).
    """

    posteriors: np.ndarray
    log_evidence: float
    zero_evidence: np.ndarray
    transition_counts: Matrix | None


class SmoothBatchResult(NamedTuple):
    """The result of ``smoothing`` a batch of B sequences of T steps.

    posteriors : ndarray, shape (B, T, n_states)
        ``posteriors[b, t] = P(S_t | o^b_0..o^b_{T-1})``.
    log_evidence : ndarray, shape (B,)
        Each member's ``log P(o^b)``; ``-inf`` where an observation had zero probability.
    zero_evidence : tuple of B ndarrays of int
        Each member's steps whose observation had zero probability.
    transition_counts : matrix of shape (n_states, n_states), or None
        With ``counts=True``, the expected transition counts summed over the batch
        (``SmoothResult.transition_counts`` of each member, added), in the same format.
    """

    posteriors: np.ndarray
    log_evidence: np.ndarray
    zero_evidence: tuple[np.ndarray, ...]
    transition_counts: Matrix | None


class SmoothChunk(NamedTuple):
    """The posteriors of steps ``start`` to ``start + c - 1`` (``smoothing_chunks``).

    posteriors : ndarray, shape (c, n_states)
        ``posteriors[k] = P(S_{start+k} | o_0..o_{T-1})``; the next chunk reuses the array.
    log_evidence : float
        ``log P(o_0..o_{T-1})`` of the whole sequence (known before the first chunk).
    zero_evidence : ndarray of int
        The steps of the whole sequence whose observation had zero probability.
    """

    start: int
    posteriors: np.ndarray
    log_evidence: float
    zero_evidence: np.ndarray


def smoothing(
    hmm: HMM,
    observations=None,
    *,
    likelihoods=None,
    log_likelihoods=None,
    initial=None,
    counts=False,
) -> SmoothResult | SmoothBatchResult:
    """Forward-backward: the posterior ``P(S_t | o_0..o_{T-1})`` of every step and the evidence.

    Parameters
    ----------
    hmm : HMM
        Any matrix format; both halves step as ``hmm.transition``'s format does.
    observations : array_like of int, shape (T,) or (B, T)
        Symbols of ``hmm.emission``, or -1 for none (as for ``filtering``).
    likelihoods, log_likelihoods : array_like, shape (T, n_states) or (B, T, n_states)
        Instead of ``observations`` (exactly one of the three): each step's
        ``P(o_t | S_t = i)`` under any emission model, or its log.
    initial : array_like, shape (n_states,) or (B, n_states), optional
        Distributions of ``S_0``; default ``hmm.prior``; broadcast against a batch of
        sequences as for ``filtering``.
    counts : bool
        Also return the expected transition counts (what an EM step needs), which keeps the
        filtered beliefs and the backward messages of every step besides the posteriors.

    Returns
    -------
    SmoothResult for one sequence, SmoothBatchResult for a batch (each member smoothed in
    turn)
    """
    if not isinstance(counts, bool | np.bool_):
        raise ValueError(f"counts must be True or False, got {counts!r}")
    evidence = read_evidence(hmm, observations, likelihoods, log_likelihoods)
    initial = read_initial(hmm, initial)
    if evidence.rows.ndim == 1 and initial.ndim == 1:
        run = _smooth(hmm, initial, evidence, counts)
        zero = np.flatnonzero(run.zero) if run.log_evidence == -np.inf else np.empty(0, np.intp)
        matrix = expected_counts(hmm.transition, *run.pairs) if run.pairs is not None else None
        return SmoothResult(run.posteriors, run.log_evidence, zero, matrix)
    initial, rows = broadcast(hmm, initial, evidence.rows)
    runs = [
        _smooth(hmm, start, Evidence(evidence.likelihoods, member, evidence.log_scale), counts)
        for start, member in zip(initial, rows, strict=True)
    ]
    matrix = None
    if counts:
        pairs = [run.pairs for run in runs if run.pairs is not None]  # every run's, with counts
        before = np.concatenate([pair[0] for pair in pairs])
        after = np.concatenate([pair[1] for pair in pairs])
        matrix = expected_counts(hmm.transition, before, after)
    return SmoothBatchResult(
        np.stack([run.posteriors for run in runs]),
        np.array([run.log_evidence for run in runs]),
        tuple(np.flatnonzero(run.zero) for run in runs),
        matrix,
    )


class _Run(NamedTuple):
    posteriors: np.ndarray
    log_evidence: float
    zero: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray] | None  # filtered beliefs and messages (T - 1, n)


def _smooth(hmm: HMM, initial: np.ndarray, evidence: Evidence, counts: bool | np.bool_) -> _Run:
    """One sequence, whole: the filtered beliefs written into the posteriors' array and
    turned into posteriors in place (kept apart when the counts need them)."""
    layout, rows, n = hmm.transition_layout, evidence.rows, hmm.n_states
    steps = rows.size
    alphas = np.empty((steps, n))
    zero = np.zeros(steps, dtype=bool)
    log_evidence = _filter(layout, initial, evidence.likelihoods, rows, alphas, zero, False, 0.0)
    posteriors = np.empty((steps, n)) if counts else alphas
    after = np.empty((steps if counts else 0, n))
    backward.backward(
        layout, evidence.likelihoods, rows, zero, alphas, posteriors, np.empty(n), True, after
    )
    log_evidence += float(evidence.offsets(zero))  # one sequence's: a float
    pairs = (alphas[:-1], after[:-1]) if counts else None
    return _Run(posteriors, float(log_evidence), zero, pairs)


def _filter(layout, initial, likelihoods, rows, beliefs, zero, resume, log_evidence) -> float:
    """The forward recursion over ``rows`` into ``beliefs``, without pruning: ``filtering``'s
    numbers to the last bit. ``zero`` (output) marks the impossible steps."""
    steps = rows.size
    return forward.forward(
        layout,
        initial,
        likelihoods,
        rows,
        NO_PRUNING,
        beliefs,
        np.empty(steps),
        zero,
        np.empty(steps),
        forward.step_threads(layout),
        resume,
        log_evidence,
    )


def checkpoint_steps(steps: int, checkpoint) -> int:
    """The steps of a segment between checkpoints: ``checkpoint``, or ``ceil(sqrt(steps))``
    for None (memory of about ``2 sqrt(T)`` beliefs, the least)."""
    if checkpoint is None:
        return math.isqrt(steps - 1) + 1
    if isinstance(checkpoint, bool) or int(checkpoint) != checkpoint or checkpoint < 1:
        raise ValueError(f"checkpoint must be an integer >= 1 or None, got {checkpoint!r}")
    return int(checkpoint)


def smoothing_chunks(
    hmm: HMM,
    observations=None,
    *,
    likelihoods=None,
    log_likelihoods=None,
    initial=None,
    checkpoint=None,
) -> Iterator[SmoothChunk]:
    """``smoothing`` of one sequence, a segment of ``checkpoint`` steps at a time from the
    last segment to the first, in O(n sqrt(T)) memory: the same posteriors to the last bit as
    ``smoothing``.

    A first forward pass keeps the filtered belief before each segment (a checkpoint) and the
    evidence; then each segment's filtered beliefs are computed again from its checkpoint
    (the last segment's are still at hand) and smoothed backwards, handing the backward
    message to the segment before. The forward recursion runs about twice in all. Symbols'
    likelihood rows are looked up a segment at a time (``inputs.read_segments``).

    Parameters
    ----------
    hmm, observations, likelihoods, log_likelihoods, initial
        As for ``smoothing``, one sequence.
    checkpoint : int >= 1, optional
        Steps per segment; default ``ceil(sqrt(T))``: ``ceil(T / k)`` checkpoints and one
        segment of ``k`` beliefs in memory.

    >>> import numpy as np
    >>> from pipeline.models import build_model
    >>> hmm = build_model("weather", 6)
    >>> whole = smoothing(hmm, [0, -1, 1, 1, 0])
    >>> parts = [c.posteriors.copy() for c in smoothing_chunks(hmm, [0, -1, 1, 1, 0])]
    >>> bool((np.concatenate(parts[::-1]) == whole.posteriors).all())
    True
    """
    steps, segment_of = read_segments(hmm, observations, likelihoods, log_likelihoods)
    initial = read_initial(hmm, initial)
    if initial.ndim != 1:
        raise ValueError("smoothing_chunks takes one sequence and one initial distribution")
    n, layout = hmm.n_states, hmm.transition_layout
    size = checkpoint_steps(steps, checkpoint)
    starts = list(range(0, steps, size))
    beliefs = np.empty((min(size, steps), n))
    zero = np.zeros(steps, dtype=bool)
    before = {}  # the filtered belief of the step before each segment but the first
    log_evidence, offsets = 0.0, 0.0
    for start in starts:
        if start:
            before[start] = beliefs[-1].copy()
        stop = min(start + size, steps)
        evidence = segment_of(start, stop)
        log_evidence = _filter(
            layout,
            before.get(start, initial),
            evidence.likelihoods,
            evidence.rows,
            beliefs[: stop - start],
            zero[start:stop],
            start > 0,
            log_evidence,
        )
        offsets += evidence.offsets(zero[start:stop])
    log_evidence = float(log_evidence + offsets)
    impossible = np.flatnonzero(zero) if log_evidence == -np.inf else np.empty(0, np.intp)
    message = np.empty(n)
    for start in reversed(starts):
        stop = min(start + size, steps)
        segment = beliefs[: stop - start]
        if stop < steps:  # the last segment's filtered beliefs and rows are still at hand
            evidence = segment_of(start, stop)
            _filter(
                layout,
                before.get(start, initial),
                evidence.likelihoods,
                evidence.rows,
                segment,
                np.zeros(stop - start, dtype=bool),
                start > 0,
                0.0,
            )
        backward.backward(
            layout,
            evidence.likelihoods,
            evidence.rows,
            zero[start:stop],
            segment,
            segment,
            message,
            stop == steps,
            np.empty((0, n)),
        )
        yield SmoothChunk(start, segment, log_evidence, impossible)
