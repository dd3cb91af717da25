"""Viterbi decoding: the most probable state path given the observations.

The recursion is the forward one with the sum over predecessors replaced by a maximum
(``pipeline.operators.max_product``, the compiled step of ``pipeline.kernels.maxproduct``),
each step divided by its largest entry so it stays finite over any horizon. Ties go to the
lowest state index: of the most probable paths, the one whose last state is lowest, then
(given it) whose state before is lowest, and so on back to the first step, each up to the
rounding of the format's arithmetic.

Back-pointers are kept as the narrowest unsigned integers that hold a state index. When
every step's pointers would take more than ``POINTER_BYTES``, the horizon is decoded in
segments of ``ceil(sqrt(T))`` steps: a first pass keeps the scaled maxima before each
segment (checkpoints), then each segment's pointers are computed again from its
checkpoint, latest segment first, and its part of the path traced back, in O(n sqrt(T))
memory for about twice the work.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference.forward import broadcast
from pipeline.inference.inputs import (
    Evidence,
    is_batch,
    read_evidence,
    read_initial,
    read_observations,
    read_segments,
    segments,
)
from pipeline.inference.recursion import Compiled, Stepped, entries, recursion
from pipeline.inference.smoother import checkpoint_steps
from pipeline.kernels import maxproduct
from pipeline.operators import check_max_product
from pipeline.shapes import BatchStatePaths, PerSequence, StatePath, Steps

POINTER_BYTES = 2**28
"""Viterbi keeps every step's back-pointers while they take at most this many bytes
(256 MiB); past it, it decodes in segments from checkpoints (``checkpoint``)."""


class ViterbiResult(NamedTuple):
    """The result of ``viterbi`` for one sequence of T steps.

    path : ndarray of int64, shape (T,)
        ``argmax over s of P(S_0..S_{T-1} = s, o_0..o_{T-1})``, ties to the lowest state
        index (the module's docstring says how).
    log_probability : float
        ``log P(path, o_0..o_{T-1})``, the joint probability of the path and the
        observations; ``-inf`` when some observation had zero probability.
    zero_evidence : ndarray of int
        The steps whose observation no path could emit: they count as unobserved.
    """

    path: StatePath
    log_probability: float
    zero_evidence: Steps


class ViterbiBatchResult(NamedTuple):
    """The result of ``viterbi`` for a batch of B sequences of T steps.

    path : ndarray of int64, shape (B, T)
        Each member's most probable path (``ViterbiResult.path``).
    log_probability : ndarray, shape (B,)
        Each member's ``log P(path, o)``.
    zero_evidence : tuple of B ndarrays of int
        Each member's steps whose observation no path could emit.
    """

    path: BatchStatePaths
    log_probability: PerSequence
    zero_evidence: tuple[Steps, ...]


def viterbi(
    hmm: HMM,
    observations=None,
    *,
    likelihoods=None,
    log_likelihoods=None,
    initial=None,
    checkpoint=None,
    transitions=None,
) -> ViterbiResult | ViterbiBatchResult:
    """The most probable state path and its log probability jointly with the observations.

    Parameters
    ----------
    hmm : HMM
        Dense, CSR and ``SparsePlusRankOne`` transitions step in O(stored entries);
        ``LowRank`` generates its rows every step and refuses above a size
        (``pipeline.operators.check_max_product``).
    observations : array_like of int, shape (T,) or (B, T)
        Symbols of ``hmm.emission``, or -1 for none (as for ``filtering``).
    likelihoods, log_likelihoods : array_like, shape (T, n_states) or (B, T, n_states)
        Instead of ``observations`` (exactly one of the three): each step's
        ``P(o_t | S_t = i)`` under any emission model, or its log.
    initial : array_like, shape (n_states,) or (B, n_states), optional
        Distributions of ``S_0``; default ``hmm.prior``; broadcast against a batch.
    checkpoint : int >= 1, optional
        Decode in segments of this many steps from checkpoints (O(n (T / k + k)) memory);
        default: every step at once while the pointers take at most ``POINTER_BYTES``,
        else segments of ``ceil(sqrt(T))``. The path is the same either way.
    transitions : optional
        Transitions that change with time, T - 1 of them, instead of ``hmm.transition``
        (as for ``filtering``); each step's operator is checked as ``hmm.transition`` is.

    Returns
    -------
    ViterbiResult for one sequence, ViterbiBatchResult for a batch (each member in turn)
    """
    if transitions is None:
        check_max_product(hmm.transition)
    initial = read_initial(hmm, initial)
    if initial.ndim == 1 and not is_batch(observations, likelihoods, log_likelihoods):
        steps, segment_of = read_segments(hmm, observations, likelihoods, log_likelihoods)
        run = recursion(hmm, transitions, steps)
        return decode(run, initial, steps, segment_of, checkpoint)
    evidence = read_evidence(hmm, observations, likelihoods, log_likelihoods)
    initial, rows = broadcast(hmm, initial, evidence.rows)
    run = recursion(hmm, transitions, rows.shape[1])
    runs = [
        decode(
            run,
            start,
            rows.shape[1],
            segments(Evidence(evidence.likelihoods, member, evidence.log_scale)),
            checkpoint,
        )
        for start, member in zip(initial, rows, strict=True)
    ]
    return ViterbiBatchResult(
        np.stack([run.path for run in runs]),
        np.array([run.log_probability for run in runs]),
        tuple(run.zero_evidence for run in runs),
    )


def _segment_steps(steps: int, n: int, width: int, checkpoint) -> int:
    if checkpoint is None and steps * n * width <= POINTER_BYTES:
        return steps
    return checkpoint_steps(steps, checkpoint)


def decode(
    run: Compiled | Stepped, initial: np.ndarray, steps: int, segment_of, checkpoint
) -> ViterbiResult:
    """``viterbi`` of one sequence by the recursion ``run`` (``pipeline.inference.recursion``)
    from ``initial`` (n,): ``steps`` steps whose evidence ``segment_of(start, stop)`` gives,
    an ``Evidence`` whose rows are those of the steps from ``start`` to ``stop - 1``."""
    n = initial.size
    pointer = np.min_scalar_type(n - 1)  # the narrowest unsigned type
    size = _segment_steps(steps, n, pointer.itemsize, checkpoint)
    starts = list(range(0, steps, size))
    back = np.zeros((min(size, steps), n), dtype=pointer)
    delta, zero = np.empty(n), np.zeros(steps, dtype=bool)
    before = {}  # the scaled maxima of the step before each segment but the first
    total, offsets = 0.0, 0.0
    for start in starts:
        if start:
            before[start] = delta.copy()
        stop = min(start + size, steps)
        evidence = segment_of(start, stop)
        total = run.viterbi(
            initial,
            evidence.likelihoods,
            evidence.rows,
            start == 0,
            delta,
            back[: stop - start],
            zero[start:stop],
            total,
            start,
        )
        offsets += evidence.offsets(zero[start:stop])
    path = np.empty(steps, dtype=np.int64)
    state = int(np.argmax(delta))  # the first maximum: the lowest state
    for start in reversed(starts):
        stop = min(start + size, steps)
        if stop < steps:  # the last segment's pointers are still in the buffer
            evidence = segment_of(start, stop)
            run.viterbi(
                initial,
                evidence.likelihoods,
                evidence.rows,
                start == 0,
                before.get(start, initial).copy(),
                back[: stop - start],
                np.zeros(stop - start, dtype=bool),
                0.0,
                start,
            )
        state = maxproduct.backtrack(back[: stop - start], state, path[start:stop])
    log_probability = -np.inf if zero.any() else float(total + offsets)
    return ViterbiResult(path, log_probability, np.flatnonzero(zero))


def path_log_probability(
    hmm: HMM,
    path,
    observations=None,
    *,
    likelihoods=None,
    log_likelihoods=None,
    initial=None,
    transitions=None,
) -> float:
    """``log P(S_0..S_{T-1} = path, o_0..o_{T-1})`` under ``hmm``: the joint log probability
    of one state path and the observations, as ``ViterbiResult.log_probability`` gives it
    for the most probable path (here a sum of logs, equal to it up to rounding).

    Parameters
    ----------
    hmm : HMM
        Any matrix format; only the entries the path visits are read
        (``pipeline.operators.entries_at``).
    path : array_like of int, shape (T,)
        States in ``0..n_states - 1``.
    observations, likelihoods, log_likelihoods
        As for ``viterbi``, one sequence of T steps (exactly one of the three).
    initial : array_like, shape (n_states,), optional
        The distribution of ``S_0``; default ``hmm.prior``.
    transitions : optional
        Transitions that change with time, T - 1 of them (as for ``viterbi``).

    Returns
    -------
    float: ``-inf`` where the path or an observation has probability zero.

    >>> from pipeline.models import build_model
    >>> hmm = build_model("weather", 6)
    >>> best = viterbi(hmm, [0, -1, 1, 1, 0])
    >>> bool(np.isclose(path_log_probability(hmm, best.path, [0, -1, 1, 1, 0]),
    ...                 best.log_probability, rtol=1e-12))
    True
    """
    initial = read_initial(hmm, initial)
    if initial.ndim != 1:
        raise ValueError("path_log_probability takes one initial distribution, shape (n_states,)")
    path = np.asarray(path)
    if path.ndim != 1 or path.size == 0 or path.dtype.kind not in "iu":
        raise ValueError(f"path must be a non-empty 1-D array of states, got {path!r}")
    if path.min() < 0 or path.max() >= hmm.n_states:
        raise ValueError(f"path has a state outside 0..{hmm.n_states - 1}")
    path = path.astype(np.int64)
    if observations is not None and likelihoods is None and log_likelihoods is None:
        symbols = read_observations(observations, hmm.n_observations)
        _check_steps(symbols.shape, path.size)
        seen = symbols >= 0
        emitted = entries(hmm.emission, path[seen], symbols[seen])
        offsets = 0.0
    else:
        evidence = read_evidence(hmm, observations, likelihoods, log_likelihoods)
        _check_steps(evidence.rows.shape, path.size)
        seen = evidence.rows >= 0
        rows = evidence.rows[seen]
        emitted = evidence.likelihoods[rows, path[seen]]
        offsets = float(evidence.log_scale[rows].sum())
    moved = recursion(hmm, transitions, path.size).moves(path)
    with np.errstate(divide="ignore"):
        terms = np.log(initial[path[0]]) + np.log(moved).sum() + np.log(emitted).sum()
    return float(terms + offsets)


def _check_steps(shape: tuple[int, ...], steps: int) -> None:
    if shape != (steps,):
        raise ValueError(
            f"the evidence must be of one sequence of {steps} steps (the path's), got {shape}"
        )
