"""What the methods kind's tasks hand each other: the exact model of a grid point, gamma, the
exact reference of a model, mode and seed, an approximation built (or the error its method
raised) and the timed runs; and how many steps of beliefs a run keeps at a time. Records
only: ``tasks`` computes them, ``timed`` times runs of them, ``plan`` wires them together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from pipeline.kinds.methods import spilled
from pipeline.methods import Approximation
from pipeline.models import HMM


@dataclass(frozen=True)
class ModelSpec:
    """One exact model of the grid: ``build_model(family, n_states, seed=seed, **params)``."""

    family: str
    n_states: int
    seed: int
    params: dict = field(default_factory=dict)


class Model(NamedTuple):
    hmm: HMM
    build_time: float


class Mixing(NamedTuple):
    """gamma of a model's transitions, as the bounds use it."""

    gamma: float  # exact, or the Doeblin lower bound where ``exact`` is false
    doeblin: float  # the Doeblin lower bound sum_j min_i T[i, j]
    exact: bool
    seconds: float  # time gamma took, over every part of its pair search


HISTORY_BYTES = 2**29
"""A cell keeps at most this many bytes of a run's beliefs at a time: the whole horizon where
it fits (every committed experiment's cells), else chunks of as many steps as fit, so a
cell's memory does not grow with the horizon."""


def history_steps(steps: int, n_states: int) -> int:
    """Steps of beliefs a run keeps at a time (``HISTORY_BYTES``), at least one."""
    return max(1, min(steps, HISTORY_BYTES // (8 * n_states)))


class Reference(NamedTuple):
    """The observations of one model, mode and seed, and their exact run, which every cell
    of the model, mode and seed is measured against: ``beliefs`` (predicted, filtered or,
    in ``smooth`` mode, smoothed) is the whole exact history where it fits
    ``HISTORY_BYTES``, else that history on the worker's disk (``spilled.SpilledHistory``),
    or None where it could not be written (each cell then runs exact inference beside its
    approximation, chunk by chunk), in ``decode`` mode (``path`` instead) or (``run``
    false) is not computed at all."""

    observations: np.ndarray  # (horizon + 1,), -1 where nothing is observed
    states: np.ndarray  # (horizon + 1,): the sampled state path, or -1 (predict)
    beliefs: np.ndarray | spilled.SpilledHistory | None  # (horizon + 1, n_states)
    log_evidence: float
    run: bool
    path: np.ndarray | None = None  # (horizon + 1,): the exact Viterbi path (decode)


class Built(NamedTuple):
    """An approximation, what it cost to build, and what its transition matrix stores."""

    approximation: Approximation
    build_time: float
    sparsity: float  # fraction of zero entries of the transitions the approximate run uses
    stored_entries: int  # numbers stored for them


class Unbuilt(NamedTuple):
    """An approximation whose method raised (a plug-in's ``ValueError``, say): its cells
    raise ``error``, the other cells of its model are timed and measured as usual."""

    error: Exception


class Timed(NamedTuple):
    """The timed runs of one model, mode and seed (``timed.timed_runs``): per round one exact
    run and one run of each approximation, each run's cumulative seconds at every step
    (the sequence modes: the whole run's, at the last step)."""

    exact: np.ndarray | None  # (rounds, steps); None without an exact run
    approx: dict[tuple[str, float], np.ndarray]  # (method, setting) -> (rounds, steps)
