"""What the methods kind's tasks hand each other: the exact model of a grid point, gamma, an
approximation built (or the error its method raised) and the timed runs (the exact
reference of a model, mode and seed is ``modes.base.Reference``). Records only: ``tasks``
computes them, ``timed`` times runs of them, ``plan`` wires them together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

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
    (a mode without a per-step clock: the whole run's, at the last step)."""

    exact: np.ndarray | None  # (rounds, steps); None without an exact run
    approx: dict[tuple[str, float], np.ndarray]  # (method, setting) -> (rounds, steps)
