"""How much memory a cell of the methods sweep needs, known before anything runs.

A cell runs in a worker process of its own size (``WORKER_BYTES``) and holds its exact
model and the approximation (each with the layout the compiled recursion reads), a run's
beliefs (``run_bytes``, for the exact and the approximate side, as its mode says: at most
``modes.base.HISTORY_BYTES`` of filtered beliefs, smoothing's checkpoints and segment,
Viterbi's back-pointers) and the observations' likelihoods. Model and approximation are measured at
two small sizes (``SMALL``) and extrapolated by the power law through them (``n`` for peaks on a
background, ``n^2`` for dense rows): any family and method, plug-ins included, without a
formula of their own; a family whose parameters fix its model (a file) estimates it itself
(``pipeline.models.model_bytes``, from the file's headers). The timing task of a model, mode
and seed holds the exact model and every approximation it times (``timing_estimate``). What a
model's tasks hold beyond the model and its approximations (``model_tasks``) is what each
reserves of its worker while it runs (``sweep.reservations``).
Other families' sizes up to
``ESTIMATED_FROM`` are not estimated: their cells are too small to matter.
"""

from __future__ import annotations

import functools
import json
import math
from typing import NamedTuple

import numpy as np

from pipeline.kinds.methods.modes import lookup
from pipeline.methods import approximate
from pipeline.models import build_model, check_model, model_bytes
from pipeline.operators import stored_entries

SMALL = (1024, 2048)
"""The sizes a family and method are measured at."""
ESTIMATED_FROM = 4096
"""Cells with more states than this are estimated."""
WORKER_BYTES = 400 * 2**20
"""A worker process's own resident memory before it holds a model: Python, NumPy, SciPy,
Dask and numba's compiled recursions (0.39 GiB measured running a 5000-state cell)."""
ENTRY_BYTES = {np.ndarray: 8}
"""Bytes a stored value takes, by format: 8 dense; 16 otherwise (a value and its index, with
what the compiled layout keeps beside them)."""


def matrix_bytes(T) -> int:
    """The bytes ``T`` and the layout the recursion reads take (an estimate for sparse
    formats: 16 bytes a stored value)."""
    return stored_entries(T) * ENTRY_BYTES.get(type(T), 16)


def _model_bytes(hmm) -> int:
    return matrix_bytes(hmm.transition) * 2 + matrix_bytes(hmm.emission) + hmm.prior.nbytes


class Estimate(NamedTuple):
    """A cell's estimated peak memory and its parts, in bytes (``total`` adds the worker's
    own ``WORKER_BYTES``)."""

    total: int
    model: int
    approximation: int
    beliefs: int


@functools.lru_cache(maxsize=len(SMALL))
def _small(family: str, params: str, n: int):
    """``family``'s model of ``n`` states: kept for the methods measured on it next (a grid's
    estimates go family by family, every method of one family in a row)."""
    return build_model(family, n, **json.loads(params))


@functools.cache
def _measured(family: str, params: str, method: str, setting: float) -> tuple[tuple, tuple]:
    """(model bytes, approximation bytes) at each size of ``SMALL``."""
    models, approximations = [], []
    for n in SMALL:
        hmm = _small(family, params, n)
        models.append(_model_bytes(hmm))
        approximations.append(_model_bytes(approximate(hmm, method, setting).hmm))
    return tuple(models), tuple(approximations)


def _extrapolate(sizes: tuple, measured: tuple, n: int) -> float:
    """The power law through two measurements, at ``n`` (exponent kept within [1, 2])."""
    if measured[0] <= 0 or measured[1] <= 0:
        return float(max(measured))
    exponent = math.log(measured[1] / measured[0]) / math.log(sizes[1] / sizes[0])
    return measured[1] * (n / sizes[1]) ** min(2.0, max(1.0, exponent))


def _model_and_approximation(
    family: str, n_states: int, params: dict, method: str, setting: float
) -> tuple[float, float] | None:
    """The bytes of the model and of its approximation: from the family's own estimate where
    its parameters fix the model (a file's headers; the approximation, which keeps at most
    the model's entries or a factorisation smaller than it, counted as large as the model),
    else measured at ``SMALL`` and extrapolated; None where neither is possible."""
    fixed = model_bytes(family, **params)
    if fixed is not None:
        return float(fixed), float(fixed)
    if n_states <= ESTIMATED_FROM:
        return None
    try:
        for n in SMALL:
            check_model(family, n, **params)
    except ValueError:
        return None
    models, approximations = _measured(family, json.dumps(params, sort_keys=True), method, setting)
    return _extrapolate(SMALL, models, n_states), _extrapolate(SMALL, approximations, n_states)


def run_bytes(mode: str, steps: int, n_states: int) -> int:
    """What one run of ``mode`` over ``steps`` steps holds at a time beyond the models and the
    likelihoods (``Mode.run_bytes``)."""
    return lookup(mode).run_bytes(steps, n_states)


def likelihood_bytes(mode: str, steps: int, n_states: int) -> int:
    """The observations' likelihood rows a run of ``mode`` holds (``Mode.likelihood_bytes``)."""
    return lookup(mode).likelihood_bytes(steps, n_states)


def one_run(mode: str, steps: int, n_states: int) -> int:
    """What one run of ``mode`` holds beyond the models: its beliefs and the likelihoods."""
    return run_bytes(mode, steps, n_states) + likelihood_bytes(mode, steps, n_states)


def cell_beliefs(mode: str, steps: int, n_states: int) -> int:
    """What a cell of ``mode`` holds beyond the models: its ``Mode.held_runs`` runs' beliefs
    and the likelihoods."""
    held = lookup(mode).held_runs * run_bytes(mode, steps, n_states)
    return held + likelihood_bytes(mode, steps, n_states)


def estimate(
    family: str, n_states: int, params: dict, method: str, setting: float, steps: int, *, mode: str
) -> Estimate | None:
    """A cell's peak memory in ``mode``, or None where it is too small to estimate or its
    family can neither be built at the measured sizes nor estimate its own model. A cell
    holds its mode's ``Mode.held_runs`` runs' worth (``run_bytes``: three, the reference's,
    kept in memory, the approximation's and the exact side it reads or computes beside it;
    one in ``decode`` mode, whose reference is a path and whose runs follow one another) and
    the likelihoods (``likelihood_bytes``)."""
    found = _model_and_approximation(family, n_states, params, method, setting)
    if found is None:
        return None
    model, approximation = found
    beliefs = cell_beliefs(mode, steps, n_states)
    total = WORKER_BYTES + model + approximation + beliefs
    return Estimate(int(total), int(model), int(approximation), beliefs)


def timing_estimate(
    family: str,
    n_states: int,
    params: dict,
    variants: list[tuple[str, float]],
    steps: int,
    *,
    modes: tuple[str, ...],
) -> int:
    """The peak memory of a model's timing task (``timed.timed_runs``), the largest over
    ``modes``, or 0 where ``estimate`` gives none: the exact model and the approximation of
    each of ``variants`` (method, setting) side by side, and one run's beliefs and
    likelihoods (its runs follow one another)."""
    found = [_model_and_approximation(family, n_states, params, m, s) for m, s in variants]
    sizes = [f for f in found if f is not None]
    if not sizes or len(sizes) < len(found):
        return 0
    held = sizes[0][0] + sum(approximation for _, approximation in sizes)
    runs = max(one_run(m, steps, n_states) for m in modes)
    return int(WORKER_BYTES + held + runs)


class ModelTasks(NamedTuple):
    """What the tasks of one model hold, in bytes: ``resident`` from the model's build until
    its last cell is done (the worker's own ``WORKER_BYTES``, the model and the approximation
    of every (method, setting) its cells need), and what each task holds beyond that while it
    runs: the build what it makes (``model``), an approximation's build its approximation
    (``approximation``, by (method, setting)), an exact reference, a timing task or the
    mixing rate one run of its mode (``run``, by mode: ``run_bytes`` and the likelihoods), a
    cell its mode's runs (``cell``, by (method, setting, mode): ``estimate``'s beliefs)."""

    resident: int
    model: int
    approximation: dict[tuple[str, float], int]
    run: dict[str, int]
    cell: dict[tuple[str, float, str], int]

    @property
    def largest(self) -> int:
        """The largest of the model's cells' ``estimate`` totals and its timing tasks'
        ``timing_estimate``: each counts the model and its approximations in full."""
        cells = (
            WORKER_BYTES + self.model + self.approximation[method, setting] + beliefs
            for (method, setting, _), beliefs in self.cell.items()
        )
        return max(self.resident + max(self.run.values()), *cells)


def model_tasks(
    family: str,
    n_states: int,
    params: dict,
    cells: list[tuple[str, float, str]],
    steps: int,
) -> ModelTasks | None:
    """``ModelTasks`` of the model of ``family`` and ``n_states`` whose cells are ``cells``
    (method, setting, mode), or None where any of them is too small to estimate
    (``estimate``)."""
    variants = list(dict.fromkeys((method, setting) for method, setting, _ in cells))
    found = {v: _model_and_approximation(family, n_states, params, *v) for v in variants}
    if not found or any(f is None for f in found.values()):
        return None
    sizes = {v: f for v, f in found.items() if f is not None}
    model = next(iter(sizes.values()))[0]
    approximations = {v: int(approximation) for v, (_, approximation) in sizes.items()}
    modes = dict.fromkeys(mode for _, _, mode in cells)
    runs = {mode: one_run(mode, steps, n_states) for mode in modes}
    beliefs = {(m, s, mode): cell_beliefs(mode, steps, n_states) for m, s, mode in cells}
    resident = WORKER_BYTES + model + sum(approximations.values())
    return ModelTasks(int(resident), int(model), approximations, runs, beliefs)


def total(spec, cell, steps: int) -> float:
    """The estimated peak memory of ``cell`` of the model ``spec`` in bytes (NaN: none)."""
    found = estimate(
        spec.family, spec.n_states, spec.params, cell.method, cell.setting, steps, mode=cell.mode
    )
    return float(found.total) if found else np.nan
