"""Prediction and filtering: the forward recursion, one sequence or a batch, optionally with
belief pruning.

Belief pruning (``prune=p``, the "top-p states" method) keeps, after each step's
conditioning, the most probable states until their mass reaches ``p`` and renormalises, so
the next step reads only the rows of the kept states.

Its namesakes: ``pipeline.kernels.forward`` (the compiled recursion this module calls) and
``pipeline.kinds.methods.modes.forward`` (the methods sweep's modes that run this one); all
three are the forward recursion, at three layers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference.inputs import Evidence, read_evidence, read_initial
from pipeline.inference.recursion import Compiled, Stepped, recursion
from pipeline.kernels import forward
from pipeline.kernels.select import mass_target
from pipeline.limits import check_memory
from pipeline.shapes import BatchBeliefs, BatchPerStep, Beliefs, PerSequence, PerStep, Steps

STEP_BYTES = 25
"""What a forward run keeps a step and sequence beside its beliefs: the step's row of the
evidence (int64), its time and pruned mass (float64 each) and its zero-evidence flag."""


class FilterResult(NamedTuple):
    """The result of ``filtering`` one sequence of T steps.

    beliefs : ndarray, shape (T, n_states)
        ``beliefs[t] = P(S_t | o_0..o_t)`` (the prediction ``P(S_t)`` where no symbol was
        observed up to ``t``); with pruning, the pruned belief. With ``history=False``, only
        the last step: shape (1, n_states).
    log_evidence : float
        ``log P(o_0..o_{T-1})`` over the observed steps; ``-inf`` when some observation had
        zero probability.
    zero_evidence : ndarray of int
        The steps whose observation had zero probability (their belief is the prediction).
    elapsed : ndarray, shape (T,)
        Seconds from the start of the recursion to the end of step ``t``, writing
        ``beliefs`` included: the recursion writes the returned history directly, and the
        first write of each of its memory pages (the system mapping it) falls in the step
        that makes it.
    pruned : ndarray, shape (T,)
        The belief mass pruning removed at step ``t`` (``TV`` between the belief before and
        after pruning); zeros without pruning.
    """

    beliefs: Beliefs
    log_evidence: float
    zero_evidence: Steps
    elapsed: PerStep
    pruned: PerStep


class FilterBatchResult(NamedTuple):
    """The result of ``filtering`` a batch of B sequences of T steps, advanced as one block.

    beliefs : ndarray, shape (B, T, n_states)
        ``beliefs[b, t] = P(S_t | o^b_0..o^b_t)``, as ``FilterResult.beliefs`` of each member:
        a view of the history the recursion writes, not a copy (``np.ascontiguousarray``
        makes one where needed): ``(T, B, n_states)`` in memory for a dense transition
        matrix, ``(T, n_states, B)`` for the others. With ``history=False``, shape
        (B, 1, n_states).
    log_evidence : ndarray, shape (B,)
        ``log P(o^b_0..o^b_{T-1})`` of each member; ``-inf`` where an observation had zero
        probability.
    zero_evidence : tuple of B ndarrays of int
        Each member's steps whose observation had zero probability.
    elapsed : ndarray, shape (T,)
        Seconds from the start of the recursion to the end of step ``t``, for the whole
        block (as ``FilterResult.elapsed``).
    pruned : ndarray, shape (B, T)
        The belief mass pruning removed from each member at each step.
    """

    beliefs: BatchBeliefs
    log_evidence: PerSequence
    zero_evidence: tuple[Steps, ...]
    elapsed: PerStep
    pruned: BatchPerStep


def predict(
    hmm: HMM, horizon: int, *, initial=None, prune=1.0, history=True, transitions=None
) -> Beliefs | BatchBeliefs:
    """State distributions ``P(S_t)`` for ``t = 0..horizon`` without observations.

    Parameters
    ----------
    hmm : HMM
    horizon : int >= 0
    initial : array_like, shape (n_states,) or (B, n_states), optional
        Distributions of ``S_0``; default ``hmm.prior``. A batch advances as one
        block (a matrix-matrix product per step), not one distribution at a time.
    prune : float in (0, 1]
        Keep the top-``prune`` states of every belief (``filtering``); 1 keeps all.
    history : bool
        False: return only the last step (``filtering``).
    transitions : optional
        Transitions that change with time, ``horizon`` of them (``filtering``).

    Returns
    -------
    ndarray, shape (horizon + 1, n_states), or (B, horizon + 1, n_states)
        Row ``t`` is ``initial @ T^t`` (without pruning; ``initial @ T_0 @ .. @ T_{t-1}``
        with ``transitions``); a batch's is a view of the recursion's history
        (``FilterBatchResult.beliefs``). With ``history=False`` the time
        axis holds the last step only (length 1).
    """
    if isinstance(horizon, bool) or int(horizon) != horizon or horizon < 0:
        raise ValueError(f"horizon must be an integer >= 0, got {horizon!r}")
    target = mass_target(prune, "prune")
    initial = read_initial(hmm, initial)
    kept = _kept(history)
    beliefs = 8 * initial.size if kept is None else 0  # a step's beliefs, kept for every step
    check_memory(
        (int(horizon) + 1) * (STEP_BYTES * (initial.size // hmm.n_states) + beliefs),
        f"horizon={int(horizon):,}",
        f"{STEP_BYTES} bytes a step and sequence" + (", and its beliefs" if beliefs else ""),
    )
    run = recursion(hmm, transitions, int(horizon) + 1)
    rows = np.full(int(horizon) + 1, -1, dtype=np.int64)  # nothing observed: no likelihoods
    nothing = Evidence(np.empty((0, hmm.n_states)), rows, np.empty(0))
    forward_ = _forward if initial.ndim == 1 else _forward_block
    return forward_(run, hmm, initial, nothing, target, kept).beliefs


def filtering(
    hmm: HMM,
    observations=None,
    *,
    likelihoods=None,
    log_likelihoods=None,
    initial=None,
    prune=1.0,
    history=True,
    transitions=None,
) -> FilterResult | FilterBatchResult:
    """The forward algorithm: filtered beliefs ``P(S_t | o_0..o_t)`` and the evidence.

    Parameters
    ----------
    hmm : HMM
        Any matrix format; the step follows ``hmm.transition``'s.
    observations : array_like of int, shape (T,) or (B, T)
        ``observations[..., t]`` in ``0..n_observations - 1`` (a symbol of
        ``hmm.emission``), or -1 for no observation.
    likelihoods, log_likelihoods : array_like, shape (T, n_states) or (B, T, n_states)
        Instead of ``observations`` (exactly one of the three): ``P(o_t | S_t = i)`` of
        each step under any emission model, or its log (``pipeline.inference`` has a
        Gaussian example); ``hmm.emission`` is not read.
    initial : array_like, shape (n_states,) or (B, n_states), optional
        Distributions of ``S_0``; default ``hmm.prior``. A batch of observation
        sequences or initial distributions (either is broadcast against the
        other) runs as one block product per step.
    prune : float in (0, 1]
        Belief pruning: after conditioning, each step's belief keeps its top-p
        states (Algorithm 1 on the belief) with ``p = prune`` and is
        renormalised; 1 (the default) keeps every state, exact inference.
    history : bool
        True (the default): ``beliefs`` holds every step. False: only the last step's
        belief is kept and returned (time axis of length 1), in memory of two steps: a
        caller who needs the final belief, the evidence and the per-step ``pruned`` and
        ``elapsed`` does not pay for writing (and the memory of) a ``T x n_states`` history.
    transitions : optional
        Transitions that change with time, instead of ``hmm.transition`` (which is then not
        read): ``transitions[t] = P(S_{t+1} | S_t)`` for ``t = 0..T - 2``, as an array
        (T - 1, n_states, n_states), a sequence of T - 1 operators (any matrix format, or a
        ``pipeline.operators.StepOperator``), or a callable ``t -> operator``
        (``pipeline.inference.recursion``). The recursion then runs step by step in Python.

    Returns
    -------
    FilterResult for one sequence, FilterBatchResult for a batch
    """
    target = mass_target(prune, "prune")
    evidence = read_evidence(hmm, observations, likelihoods, log_likelihoods)
    initial = read_initial(hmm, initial)
    kept = _kept(history)
    run = recursion(hmm, transitions, evidence.rows.shape[-1])
    if evidence.rows.ndim == 1 and initial.ndim == 1:
        return _forward(run, hmm, initial, evidence, target, kept)
    return _forward_block(run, hmm, initial, evidence, target, kept)


def _kept(history) -> int | None:
    """The steps a run keeps: all (None) or the last two (the step and the one before)."""
    if not isinstance(history, bool | np.bool_):
        raise ValueError(f"history must be True or False, got {history!r}")
    return None if history else 2


class Chunk(NamedTuple):
    """``chunk`` steps of ``filtering``, from step ``start`` (``filtering_chunks``).

    beliefs : ndarray, shape (c, n_states)
        ``beliefs[k] = P(S_{start+k} | o_0..o_{start+k})``; the next chunk reuses the array.
    log_evidence : float
        ``log P(o_0..o_{start+c-1})``, every step so far.
    zero : ndarray of bool, shape (c,)
        Where the observation had zero probability.
    elapsed : ndarray, shape (c,)
        Seconds from the start of the chunk's call to the end of each of its steps.
    pruned : ndarray, shape (c,)
        The belief mass pruning removed at each step.
    """

    start: int
    beliefs: np.ndarray
    log_evidence: float
    zero: np.ndarray
    elapsed: np.ndarray
    pruned: np.ndarray


def filtering_chunks(
    hmm: HMM,
    observations=None,
    *,
    chunk: int,
    likelihoods=None,
    log_likelihoods=None,
    prune=1.0,
    transitions=None,
) -> Iterator[Chunk]:
    """``filtering`` of one sequence, ``chunk`` steps at a time: the same numbers to the last
    bit as one call, in memory of ``chunk`` beliefs (a history of ``(T, n_states)`` never
    exists). Each chunk continues the recursion from the last belief of the one before.
    The evidence and ``transitions`` are given as to ``filtering``.

    >>> import numpy as np
    >>> from pipeline.models import build_model
    >>> hmm = build_model("weather", 6)
    >>> whole = filtering(hmm, [0, -1, 1, 1])
    >>> parts = [c.beliefs.copy() for c in filtering_chunks(hmm, [0, -1, 1, 1], chunk=3)]
    >>> bool((np.concatenate(parts) == whole.beliefs).all())
    True
    """
    if isinstance(chunk, bool) or int(chunk) != chunk or chunk < 1:
        raise ValueError(f"chunk must be an integer >= 1, got {chunk!r}")
    target = mass_target(prune, "prune")
    evidence = read_evidence(hmm, observations, likelihoods, log_likelihoods)
    rows = evidence.rows
    if rows.ndim != 1:
        raise ValueError(f"the evidence must be of one sequence, got {rows.shape[0]} sequences")
    steps, n = rows.size, hmm.n_states
    run = recursion(hmm, transitions, steps)
    size = min(int(chunk), steps)
    buffers = _touched((size, n)), _touched((size, n))
    previous, log_evidence, offsets = hmm.prior, 0.0, 0.0
    for k, start in enumerate(range(0, steps, size)):
        part = rows[start : start + size]
        beliefs = buffers[k % 2][: part.size]  # the other buffer holds the step before
        elapsed, pruned = np.empty(part.size), np.empty(part.size)
        zero = np.zeros(part.size, dtype=bool)
        log_evidence = run.forward(
            previous,
            evidence.likelihoods,
            part,
            target,
            beliefs,
            elapsed,
            zero,
            pruned,
            start > 0,
            log_evidence,
            start,
        )
        offsets += float(Evidence(evidence.likelihoods, part, evidence.log_scale).offsets(zero))
        yield Chunk(start, beliefs, float(log_evidence) + offsets, zero, elapsed, pruned)
        previous = beliefs[-1]


def _forward(
    run: Compiled | Stepped, hmm: HMM, initial, evidence: Evidence, target: float, kept=None
) -> FilterResult:
    rows = evidence.rows
    steps, n = rows.size, hmm.n_states
    beliefs = np.empty((min(steps, kept or steps), n))  # pages mapped as the steps write
    elapsed, pruned = np.empty(steps), np.empty(steps)
    zero = np.zeros(steps, dtype=bool)
    log_evidence = run.forward(
        initial, evidence.likelihoods, rows, target, beliefs, elapsed, zero, pruned, False, 0.0
    )
    log_evidence += float(evidence.offsets(zero))  # one sequence's: a float
    zero = np.flatnonzero(zero) if log_evidence == -np.inf else np.empty(0, np.intp)
    if kept:
        beliefs = beliefs[(steps - 1) % beliefs.shape[0]][None]
    return FilterResult(beliefs, float(log_evidence), zero, elapsed, pruned)


def broadcast(hmm: HMM, initial: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A batch's initial distributions (B, n) and rows (B, T), one broadcast against the
    other: the batch is as large as the larger of the two."""
    size = max(rows.shape[0] if rows.ndim == 2 else 1, initial.shape[0] if initial.ndim == 2 else 1)
    rows = np.ascontiguousarray(np.broadcast_to(np.atleast_2d(rows), (size, rows.shape[-1])))
    return np.broadcast_to(np.atleast_2d(initial), (size, hmm.n_states)), rows


def _forward_block(
    run: Compiled | Stepped, hmm: HMM, initial, evidence: Evidence, target: float, kept=None
) -> FilterBatchResult:
    """A batch: the kernels step blocks of B members, one product a step, member-major (B, n)
    or state-major (n, B) as the layout takes them (``forward.members_first``)."""
    initial, rows = broadcast(hmm, initial, evidence.rows)
    size, steps = rows.shape
    members = isinstance(run, Compiled) and forward.members_first(run.layout)
    block = np.ascontiguousarray(initial if members else initial.T)
    beliefs = np.empty((min(steps, kept or steps), *block.shape))  # as in _forward
    elapsed = np.empty(steps)
    zero = np.zeros((size, steps), dtype=bool)
    pruned = np.zeros((size, steps))
    log_evidence = np.zeros(size)
    run.forward_block(
        block, evidence.likelihoods, rows, target, beliefs, elapsed, zero, pruned, log_evidence
    )
    log_evidence += Evidence(evidence.likelihoods, rows, evidence.log_scale).offsets(zero)
    if kept:
        beliefs = beliefs[(steps - 1) % beliefs.shape[0]][None]
    return FilterBatchResult(
        # a view: copying it would cost more than the steps
        beliefs.transpose(1, 0, 2) if members else beliefs.transpose(2, 0, 1),
        log_evidence,
        tuple(np.flatnonzero(member) for member in zero),
        elapsed,
        pruned,
    )


PAGE_FLOATS = 512
"""float64 values in a 4 KiB memory page."""


def _touched(shape: tuple[int, ...]) -> np.ndarray:
    """A new float64 array with every memory page already mapped (one write a page): the
    buffers ``filtering_chunks`` reuses chunk after chunk, mapped once before the first."""
    array = np.empty(shape)
    array.reshape(-1)[::PAGE_FLOATS] = 0.0
    return array
