"""What the inference functions read, checked and normalised once: the initial
distributions, and the evidence of each step given as symbols, likelihoods or log-likelihoods.

Whatever form the evidence takes, the recursions read one: a table of likelihood rows
``P(o | S)`` (one per distinct symbol, or one per step) and, for each step, the row
observed or -1 (``Evidence``). A row whose largest entry is far from 1 is divided by a
power of two (``SCALE_RANGE``) and a row of log-likelihoods by the exponential of its
largest entry; the logs of those factors go back into the evidence (``Evidence.offsets``),
so products of beliefs and likelihoods stay in floating point's normal range however small
the likelihoods are.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM, normalised_rows, precision
from pipeline.operators import columns

SCALE_RANGE = 256
"""A likelihood row whose largest entry lies outside ``[2^-256, 2^256]`` is divided by the
power of two that brings that entry into ``[0.5, 1)``: exact (a power of two changes only
the exponent, subnormal entries gain bits), and an emission of ``1e-322`` or ``5e-324`` at
every step keeps the evidence exact where the products of a belief and such a row would
fall into the subnormal range or to zero. Rows within the range are read as they are."""


class Evidence(NamedTuple):
    """The evidence of every step, as the compiled recursions read it.

    likelihoods : ndarray, shape (k, n_states)
        ``P(o | S)`` of each distinct observation (a symbol, or a step's own row), each row
        divided by ``exp(log_scale[r])``.
    rows : ndarray of int64, shape (T,) or (B, T)
        The row of ``likelihoods`` observed at each step, or -1 for none.
    log_scale : ndarray, shape (k,)
        The log of the factor each row was divided by.
    """

    likelihoods: np.ndarray
    rows: np.ndarray
    log_scale: np.ndarray

    def offsets(self, zero: np.ndarray) -> float | np.ndarray:
        """What the rows' scales add to the log evidence: ``log_scale`` summed over the
        observed steps whose observation had non-zero probability (``zero`` (T,) or (B, T)
        bool marks the others); a float, or (B,) for a batch."""
        counted = (self.rows >= 0) & ~zero
        if not self.log_scale.any():
            return 0.0 if self.rows.ndim == 1 else np.zeros(self.rows.shape[0])
        added = np.where(counted, self.log_scale[np.maximum(self.rows, 0)], 0.0).sum(axis=-1)
        return float(added) if self.rows.ndim == 1 else added


def read_initial(hmm: HMM, initial) -> np.ndarray:
    """``initial`` checked as one distribution (n,) or a batch (B, n); ``hmm.prior`` for None.
    Given in float32 or float16, it is read as ``HMM`` reads a prior (``normalised_rows``)."""
    if initial is None:
        return hmm.prior
    given = precision(initial)
    initial = np.ascontiguousarray(initial, dtype=np.float64)
    if initial.ndim not in (1, 2) or initial.shape[-1] != hmm.n_states or initial.size == 0:
        raise ValueError(
            f"initial must have shape ({hmm.n_states},) or (B, {hmm.n_states}), got {initial.shape}"
        )
    rows = normalised_rows("initial", np.atleast_2d(initial), given, vector=initial.ndim == 1)
    return rows.reshape(initial.shape)


def read_evidence(hmm: HMM, observations, likelihoods, log_likelihoods) -> Evidence:
    """The evidence from exactly one of the three forms an inference function accepts.

    Parameters
    ----------
    observations : int array (T,) or (B, T)
        Symbols ``0..n_observations - 1`` of ``hmm.emission``, or -1 for none.
    likelihoods : float array (T, n_states) or (B, T, n_states)
        ``P(o_t | S_t = i)`` of each step's observation under any emission model
        (``hmm.emission`` is not read).
    log_likelihoods : float array, as ``likelihoods``
        The same as logs; ``-inf`` for a likelihood of zero.
    """
    given = [
        name
        for name, value in (
            ("observations", observations),
            ("likelihoods", likelihoods),
            ("log_likelihoods", log_likelihoods),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise ValueError(
            "give exactly one of observations, likelihoods and log_likelihoods; got "
            + (", ".join(given) or "none")
        )
    if observations is not None:
        observations = read_observations(observations, hmm.n_observations)
        table, rows = _symbol_rows(hmm.emission, observations)
        table, log_scale = _scaled(table)
        return Evidence(table, rows, log_scale)
    if likelihoods is not None:
        return read_likelihoods(likelihoods, hmm.n_states)
    table, rows = _step_rows(log_likelihoods, hmm.n_states, "log_likelihoods")
    if np.isnan(table).any() or (table == np.inf).any():
        index = _first(np.isnan(table) | (table == np.inf), rows.shape)
        raise ValueError(
            f"log_likelihoods[{index}] is NaN or +inf; allowed: numbers in [-inf, inf)"
        )
    top = table.max(axis=1)
    log_scale = np.where(np.isfinite(top), top, 0.0)
    return Evidence(np.exp(table - log_scale[:, None]), rows, log_scale)


def read_likelihoods(likelihoods, n_states: int) -> Evidence:
    """The evidence of per-step likelihoods ``P(o_t | S_t = i)``, shape (T, n_states) or
    (B, T, n_states), finite and non-negative: what ``read_evidence`` makes of
    ``likelihoods=``, for a caller with its own emission model and no ``HMM``
    (``pipeline.coupled``). Every step counts as observed (a row of ones observes nothing,
    and renormalises the belief)."""
    table, rows = _step_rows(likelihoods, n_states, "likelihoods")
    if not (np.isfinite(table).all() and (table >= 0).all()):
        index = _first(~np.isfinite(table) | (table < 0), rows.shape)
        raise ValueError(
            f"likelihoods[{index}] is not a finite non-negative number; allowed: "
            "likelihoods in [0, inf)"
        )
    table, log_scale = _scaled(table)
    return Evidence(table, rows, log_scale)


def is_batch(observations, likelihoods, log_likelihoods) -> bool:
    """Whether the evidence given is of a batch of sequences: symbols (B, T) or likelihoods
    (B, T, n_states); ``read_evidence`` checks the rest."""
    if observations is not None:
        return np.ndim(observations) == 2
    given = likelihoods if likelihoods is not None else log_likelihoods
    return given is not None and np.ndim(given) == 3


def read_segments(hmm: HMM, observations, likelihoods, log_likelihoods):
    """One sequence's evidence a segment of steps at a time, for the recursions that hold
    only a segment in memory (``smoothing_chunks``, ``viterbi`` from checkpoints).

    Returns the number of steps T and ``segment(start, stop)``, the ``Evidence`` of steps
    ``start .. stop - 1`` (its rows counted from ``start``): for symbols, a table of that
    segment's symbols alone, so the horizon's likelihood rows (up to T n_states values)
    never exist at once; for per-step likelihoods, views of the whole table (the caller's
    array, as large).
    """
    if observations is not None and likelihoods is None and log_likelihoods is None:
        symbols = read_observations(observations, hmm.n_observations)
        if symbols.ndim != 1:
            raise ValueError(f"the evidence must be of one sequence, got {symbols.shape[0]}")

        def of_symbols(start: int, stop: int) -> Evidence:
            table, rows = _symbol_rows(hmm.emission, symbols[start:stop])
            table, log_scale = _scaled(table)
            return Evidence(table, rows, log_scale)

        return symbols.size, of_symbols
    whole = read_evidence(hmm, observations, likelihoods, log_likelihoods)
    if whole.rows.ndim != 1:
        raise ValueError(f"the evidence must be of one sequence, got {whole.rows.shape[0]}")
    return whole.rows.size, segments(whole)


def segments(evidence: Evidence):
    """``segment(start, stop)``, the ``Evidence`` of one sequence's steps from ``start`` to
    ``stop - 1``: views of the rows of its ``evidence``."""

    def segment(start: int, stop: int) -> Evidence:
        return Evidence(evidence.likelihoods, evidence.rows[start:stop], evidence.log_scale)

    return segment


def read_observations(observations, n_observations: int) -> np.ndarray:
    """Symbols (T,) or (B, T) in ``0..n_observations - 1``, or -1, as int64."""
    observations = np.asarray(observations)
    if observations.ndim not in (1, 2) or observations.shape[-1] == 0 or observations.size == 0:
        raise ValueError(
            f"observations must be a non-empty 1-D or 2-D array, got shape {observations.shape}"
        )
    if observations.dtype.kind not in "iu":
        raise ValueError(
            f"observations must be integers, got dtype {observations.dtype}; per-step "
            "likelihoods go in likelihoods= or log_likelihoods="
        )
    if observations.min() < -1 or observations.max() >= n_observations:
        bad = (observations < -1) | (observations >= n_observations)
        where = ", ".join(str(int(i)) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"observations[{where}] = {observations[bad][0]}; allowed: -1 (none) or "
            f"0..{n_observations - 1}"
        )
    return np.asarray(observations, dtype=np.int64)


def _first(bad: np.ndarray, steps: tuple[int, ...]) -> str:
    """The index ``t, i`` (or ``b, t, i``) of the first True of ``bad`` (k, n_states)."""
    row, state = np.argwhere(bad)[0]
    return ", ".join(str(int(k)) for k in (*np.unravel_index(row, steps), state))


def _step_rows(values, n_states: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """One likelihood row per step: the table (T or B T, n_states) and each step's row."""
    values = np.asarray(values)
    if values.dtype.kind not in "biuf":
        raise ValueError(f"{name} has {values.dtype} entries; allowed: real numbers")
    if values.ndim not in (2, 3) or values.shape[-1] != n_states or values.size == 0:
        raise ValueError(
            f"{name} must have shape (T, {n_states}) or (B, T, {n_states}), got {values.shape}"
        )
    table = np.array(values, dtype=np.float64).reshape(-1, n_states)
    return table, np.arange(table.shape[0], dtype=np.int64).reshape(values.shape[:-1])


def _symbol_rows(emission, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``P(o | S)`` for each distinct observed symbol (k, n_states), and each step's row
    into it (the shape of ``observations``, -1 where nothing was observed)."""
    seen = observations >= 0
    if not seen.any():  # nothing to look up
        return np.empty((0, emission.shape[0])), np.full(observations.shape, -1, np.int64)
    observed = np.unique(observations[seen])
    rows = np.where(seen, np.searchsorted(observed, observations), -1)
    return np.ascontiguousarray(columns(emission, observed).T), rows


def _scaled(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``table`` with each row whose maximum lies outside ``SCALE_RANGE`` divided by a power
    of two, exactly, and the log of each row's factor (0 for the others)."""
    top = table.max(axis=1) if table.size else np.empty(0)
    outside = (top > 0) & ((top < 2.0**-SCALE_RANGE) | (top > 2.0**SCALE_RANGE))
    if not outside.any():
        return np.ascontiguousarray(table), np.zeros(table.shape[0])
    exponent = np.where(outside, np.frexp(top)[1], 0)
    table = np.ldexp(table, -exponent[:, None])
    return np.ascontiguousarray(table), exponent * np.log(2.0)
