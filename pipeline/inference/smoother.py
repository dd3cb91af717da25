"""Smoothing: the posterior of every step given the whole sequence, by forward-backward.

The forward half is the filtering recursion itself (``pipeline.kernels.forward.forward``:
the filtered beliefs are ``filtering``'s to the last bit); the backward half
(``pipeline.kernels.backward.backward``) takes the backward step of the same layout, a
product with ``T`` where the forward step is one with ``T.T``, and turns each filtered
belief into the posterior in place. Both halves rescale every message, so they stay finite
over any horizon.

``smoothing`` returns every step's posterior (memory: the posteriors and O(n) more).
``forward_backward`` is the recursion itself, keeping what it passes from step to step: the
filtered beliefs and the backward messages, for an algorithm built on one chain's smoother
(``pipeline.coupled``: exact inference on the joint chain, the structured mean field).
``smoothing_chunks`` hands them out a segment at a time, latest first, from filtered beliefs
kept every ``k`` steps (checkpoints) and recomputed in between: memory of about
``(T / k + k) n`` values, O(n sqrt(T)) for ``k = sqrt(T)``, for models whose posteriors
over the horizon do not fit in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple, TypeAlias

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference.forward import broadcast
from pipeline.inference.inputs import Evidence, read_evidence, read_initial, read_segments
from pipeline.inference.recursion import Compiled, Stepped, recursion
from pipeline.operators import Matrix
from pipeline.shapes import BatchBeliefs, Beliefs, PerSequence, Steps

NO_PRUNING = np.inf
"""The forward recursion's prune target that keeps every state."""

Counts: TypeAlias = Matrix | np.ndarray | tuple[Matrix, ...]
"""Expected transition counts: one matrix, or one per step (T - 1, n, n) or a tuple of them
for transitions that change with time."""


class SmoothResult(NamedTuple):
    """The result of ``smoothing`` one sequence of T steps.

    posteriors : ndarray, shape (T, n_states)
        ``posteriors[t] = P(S_t | o_0..o_{T-1})``.
    log_evidence : float
        ``log P(o_0..o_{T-1})``; ``-inf`` when some observation had zero probability.
    zero_evidence : ndarray of int
        The steps whose observation had zero probability: they count as unobserved, in the
        forward and the backward half alike.
    transition_counts : matrix of shape (n_states, n_states), per-step counts, or None
        With ``counts=True``, the expected transition counts
        ``sum_t P(S_t = i, S_{t+1} = j | o_0..o_{T-1})`` (``pipeline.operators.
        expected_counts``: an ndarray for a dense transition matrix, a ``csr_array`` on the
        stored entries of a CSR one, a ``LowRank`` for the factored formats). With
        ``transitions``, each step's ``P(S_t = i, S_{t+1} = j | o_0..o_{T-1})`` instead:
        an array (T - 1, n_states, n_states) for transitions given as one, else a tuple of
        T - 1 matrices in their steps' formats.
    """

    posteriors: Beliefs
    log_evidence: float
    zero_evidence: Steps
    transition_counts: Counts | None


class SmoothBatchResult(NamedTuple):
    """The result of ``smoothing`` a batch of B sequences of T steps.

    posteriors : ndarray, shape (B, T, n_states)
        ``posteriors[b, t] = P(S_t | o^b_0..o^b_{T-1})``.
    log_evidence : ndarray, shape (B,)
        Each member's ``log P(o^b)``; ``-inf`` where an observation had zero probability.
    zero_evidence : tuple of B ndarrays of int
        Each member's steps whose observation had zero probability.
    transition_counts : matrix of shape (n_states, n_states), per-step counts, or None
        With ``counts=True``, the expected transition counts summed over the batch
        (``SmoothResult.transition_counts`` of each member, added), in the same format.
    """

    posteriors: BatchBeliefs
    log_evidence: PerSequence
    zero_evidence: tuple[Steps, ...]
    transition_counts: Counts | None


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
    transitions=None,
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
    transitions : optional
        Transitions that change with time, T - 1 of them, instead of ``hmm.transition``
        (as for ``filtering``); both halves then run step by step in Python.

    Returns
    -------
    SmoothResult for one sequence, SmoothBatchResult for a batch (each member smoothed in
    turn)
    """
    if not isinstance(counts, bool | np.bool_):
        raise ValueError(f"counts must be True or False, got {counts!r}")
    evidence = read_evidence(hmm, observations, likelihoods, log_likelihoods)
    initial = read_initial(hmm, initial)
    run = recursion(hmm, transitions, evidence.rows.shape[-1])
    if evidence.rows.ndim == 1 and initial.ndim == 1:
        found = forward_backward(run, initial, evidence, keep=bool(counts))
        matrix = run.counts([found.filtered[:-1]], [found.after[:-1]]) if counts else None
        return SmoothResult(found.posteriors, found.log_evidence, found.zero_evidence, matrix)
    initial, rows = broadcast(hmm, initial, evidence.rows)
    runs = [
        forward_backward(
            run, start, Evidence(evidence.likelihoods, member, evidence.log_scale), bool(counts)
        )
        for start, member in zip(initial, rows, strict=True)
    ]
    matrix = None
    if counts:
        matrix = run.counts([m.filtered[:-1] for m in runs], [m.after[:-1] for m in runs])
    return SmoothBatchResult(
        np.stack([m.posteriors for m in runs]),
        np.array([m.log_evidence for m in runs]),
        tuple(np.flatnonzero(m.zero) for m in runs),
        matrix,
    )


class Messages(NamedTuple):
    """One sequence's forward-backward recursion (``forward_backward``), T steps of n states.

    filtered : ndarray, shape (T, n), or (0, n) when not kept
        ``P(S_t | o_0..o_t)``, ``filtering``'s beliefs.
    posteriors : ndarray, shape (T, n)
        ``P(S_t | o_0..o_{T-1})``.
    after : ndarray, shape (T, n), or (0, n) when not kept
        The backward message into step ``t + 1`` over the step's normaliser: ``P(S_t = i,
        S_{t+1} = j | o) = filtered[t, i] T_t[i, j] after[t, j]``, so ``after[t]`` is
        proportional to ``P(o_{t+1} | S_{t+1}) P(o_{t+2}..o_{T-1} | S_{t+1})``; zeros at the
        last step.
    log_evidence : float
        ``log P(o_0..o_{T-1})``; ``-inf`` when some observation had zero probability.
    zero : ndarray of bool, shape (T,)
        The steps whose observation had zero probability: each kept its predicted belief,
        and both halves count it as unobserved.
    """

    filtered: np.ndarray
    posteriors: np.ndarray
    after: np.ndarray
    log_evidence: float
    zero: np.ndarray

    @property
    def zero_evidence(self) -> np.ndarray:
        """``zero``'s steps, as ``SmoothResult.zero_evidence`` lists them: none unless the
        evidence is ``-inf``."""
        if self.log_evidence == -np.inf:
            return np.flatnonzero(self.zero)
        return np.empty(0, np.intp)


def forward_backward(
    run: Compiled | Stepped, initial: np.ndarray, evidence: Evidence, keep: bool
) -> Messages:
    """The forward-backward recursion of one sequence: ``smoothing``'s, to the last bit.

    ``run`` the recursion (``pipeline.inference.recursion``: ``Compiled`` or ``Stepped``),
    ``initial`` (n,) the distribution of ``S_0``, ``evidence`` one sequence's (``inputs``);
    ``keep``: keep the filtered beliefs and the backward messages (``Messages``), otherwise
    the filtered beliefs are turned into the posteriors in place.
    """
    rows, n = evidence.rows, initial.size
    steps = rows.size
    alphas = np.empty((steps, n))
    zero = np.zeros(steps, dtype=bool)
    log_evidence = _filter(run, initial, evidence.likelihoods, rows, alphas, zero, False, 0.0)
    posteriors = np.empty((steps, n)) if keep else alphas
    after = np.empty((steps if keep else 0, n))
    run.backward(evidence.likelihoods, rows, zero, alphas, posteriors, np.empty(n), True, after)
    log_evidence += float(evidence.offsets(zero))  # one sequence's: a float
    filtered = alphas if keep else np.empty((0, n))
    return Messages(filtered, posteriors, after, float(log_evidence), zero)


def _filter(run, initial, likelihoods, rows, beliefs, zero, resume, log_evidence, start=0):
    """The forward recursion over ``rows`` (steps ``start`` on) into ``beliefs``, without
    pruning: ``filtering``'s numbers to the last bit. ``zero`` (output) marks the impossible
    steps. Returns the log evidence."""
    steps = rows.size
    return run.forward(
        initial,
        likelihoods,
        rows,
        NO_PRUNING,
        beliefs,
        np.empty(steps),
        zero,
        np.empty(steps),
        resume,
        log_evidence,
        start,
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
    transitions=None,
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
    hmm, observations, likelihoods, log_likelihoods, initial, transitions
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
    n, run = hmm.n_states, recursion(hmm, transitions, steps)
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
            run,
            before.get(start, initial),
            evidence.likelihoods,
            evidence.rows,
            beliefs[: stop - start],
            zero[start:stop],
            start > 0,
            log_evidence,
            start,
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
                run,
                before.get(start, initial),
                evidence.likelihoods,
                evidence.rows,
                segment,
                np.zeros(stop - start, dtype=bool),
                start > 0,
                0.0,
                start,
            )
        run.backward(
            evidence.likelihoods,
            evidence.rows,
            zero[start:stop],
            segment,
            segment,
            message,
            stop == steps,
            np.empty((0, n)),
            start,
        )
        yield SmoothChunk(start, segment, log_evidence, impossible)
