"""Sampling state paths and observations from an HMM in any format.

Each step draws every sequence's next state from the rows of its current states, and the
symbols from the emission rows of the states, by ``pipeline.operators.column_sampler``: from
the stored entries and the factors, never from generated dense rows (a ``LowRank`` row
whose band holds most of its product aside).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference.recursion import recursion
from pipeline.limits import check_memory
from pipeline.operators import column_sampler, draw_dense
from pipeline.shapes import BatchObservations, BatchStatePaths, Observations, StatePath

DRAW_BYTES = 32
"""The memory ``sample`` takes a step and sequence: the states and the symbols drawn (int64
each), and the copies it returns."""


class Sample(NamedTuple):
    """One sequence drawn from an HMM over steps ``0..horizon``.

    states : ndarray of int64, shape (horizon + 1,)
        ``states[0] ~ P(S_0)``, ``states[t] ~ P(S_t | S_{t-1} = states[t - 1])``.
    observations : ndarray of int64, shape (horizon + 1,)
        ``observations[t] ~ P(O_t | S_t = states[t])``.
    """

    states: StatePath
    observations: Observations


class SampleBatch(NamedTuple):
    """B independent sequences drawn from an HMM over steps ``0..horizon``.

    states : ndarray of int64, shape (B, horizon + 1)
        Each row a path as ``Sample.states``.
    observations : ndarray of int64, shape (B, horizon + 1)
        Each row the symbols of its path, as ``Sample.observations``.
    """

    states: BatchStatePaths
    observations: BatchObservations


def sample(
    hmm: HMM, horizon: int, *, seed, n_sequences: int = 1, transitions=None
) -> Sample | SampleBatch:
    """State paths and their symbols over steps ``0..horizon`` (as ``predict``'s), drawn from
    ``hmm``.

    Parameters
    ----------
    hmm : HMM
        Any matrix format.
    horizon : int >= 0
    seed : int, sequence of ints or numpy.random.SeedSequence
        Seeds ``numpy.random.default_rng``: the same seed gives the same draws.
    n_sequences : int >= 1
        1 (the default) gives a ``Sample`` of one sequence; more, a ``SampleBatch``.
    transitions : optional
        Transitions that change with time, ``horizon`` of them, instead of
        ``hmm.transition`` (as for ``filtering``): ``states[t]`` is drawn from the rows of
        ``transitions[t - 1]``; each must be a matrix (``column_sampler``).

    ``ValueError`` names ``horizon`` and ``n_sequences`` when their draws (``DRAW_BYTES`` a
    step and sequence) cannot fit this machine's memory.

    >>> from pipeline.models import build_model
    >>> drawn = sample(build_model("weather", 6), 4, seed=0, n_sequences=3)
    >>> drawn.states.shape, drawn.observations.shape
    ((3, 5), (3, 5))
    """
    if isinstance(horizon, bool) or int(horizon) != horizon or horizon < 0:
        raise ValueError(f"horizon must be an integer >= 0, got {horizon!r}")
    if isinstance(n_sequences, bool) or int(n_sequences) != n_sequences or n_sequences < 1:
        raise ValueError(f"n_sequences must be an integer >= 1, got {n_sequences!r}")
    steps, size = int(horizon) + 1, int(n_sequences)
    check_memory(
        DRAW_BYTES * steps * size,
        f"horizon={steps - 1:,} with n_sequences={size:,}",
        f"{DRAW_BYTES} bytes a step and sequence: the states and symbols drawn, and the copies "
        "returned",
    )
    rng = np.random.default_rng(seed)
    states = np.empty((steps, size), np.int64)  # step-major: each step's draws are contiguous
    states[0] = draw_dense(np.broadcast_to(hmm.prior, (size, hmm.n_states)), rng)
    run = recursion(hmm, transitions, steps)
    for t in range(1, steps):
        states[t] = run.sampler(t - 1)(states[t - 1], rng)
    observations = column_sampler(hmm.emission)(states.reshape(-1), rng).reshape(steps, size)
    if size == 1:
        return Sample(states[:, 0].copy(), observations[:, 0].copy())
    return SampleBatch(np.ascontiguousarray(states.T), np.ascontiguousarray(observations.T))
