"""The store of the learning sweep: EM whose E-step is an approximation, against exact EM
from the same start on the same data (``pipeline.learning.compare``).

A cell is one ``(family, n_states, seed, sequences, length, method, setting)``: a
generating model, its training data (``sequences`` sequences of ``length`` steps) and
held-out data, and one approximate E-step. The exact-EM reference of the problem (its first
five dims) is computed once and its history stored in each of its cells (the ``*_exact``
variables, equal across ``method`` and ``setting``); ``references(ds)`` reduces them to the
problem's dims, as ``pipeline.learning.summary`` reads them. ``setting`` is the union of
every method's settings: a method's cell at another's setting is not in the grid
(``in_grid``). ``summary`` is the table a sweep prints at its end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from pipeline.results.schema import Record, Schema, Variable, shown, status_variables, text_table

DIMS = ("family", "n_states", "seed", "sequences", "length", "method", "setting")
"""The dimensions of a cell."""
SERIES = (*DIMS, "iteration")
EXACT = ("training_exact", "held_out_exact", "e_step_seconds_exact", "m_step_seconds_exact")
"""The exact-EM reference's series, stored in every cell of its problem."""

AFTER = "NaN after the run's last iteration"


def _distances(prefix: str, other: str) -> dict[str, Variable]:
    return {
        f"{prefix}_prior": Variable(DIMS, "1", f"TV of the fitted prior from {other}'s"),
        f"{prefix}_transition_mean": Variable(
            DIMS, "1", f"mean over states of the TV of a fitted transition row from {other}'s"
        ),
        f"{prefix}_transition_max": Variable(
            DIMS, "1", f"largest over states of the TV of a fitted transition row from {other}'s"
        ),
        f"{prefix}_emission_mean": Variable(
            DIMS, "1", f"mean over states of the TV of a fitted emission row from {other}'s"
        ),
        f"{prefix}_emission_max": Variable(
            DIMS, "1", f"largest over states of the TV of a fitted emission row from {other}'s"
        ),
    }


VARIABLES: dict[str, Variable] = {
    "training": Variable(
        SERIES,
        "nat",
        "training log-likelihood per observed step under the parameters the iteration "
        "started from, as the approximate E-step computed it",
        missing=AFTER,
    ),
    "held_out": Variable(
        SERIES,
        "nat",
        "held-out log-likelihood per observed step, exact, under the iteration's model",
        missing=AFTER,
    ),
    "e_step_seconds": Variable(
        SERIES, "s", "seconds of the iteration's E-step", missing=AFTER, timed=True
    ),
    "m_step_seconds": Variable(
        SERIES, "s", "seconds of the iteration's M-step", missing=AFTER, timed=True
    ),
    "training_exact": Variable(
        SERIES, "nat", "exact EM's training log-likelihood per observed step", missing=AFTER
    ),
    "held_out_exact": Variable(
        SERIES, "nat", "exact EM's held-out log-likelihood per observed step", missing=AFTER
    ),
    "e_step_seconds_exact": Variable(
        SERIES, "s", "seconds of exact EM's E-step", missing=AFTER, timed=True
    ),
    "m_step_seconds_exact": Variable(
        SERIES, "s", "seconds of exact EM's M-step", missing=AFTER, timed=True
    ),
    "iterations": Variable(DIMS, "1", "iterations the approximate run made"),
    "converged": Variable(
        DIMS, "1", "the approximate run stopped by the tolerance before the iteration cap", "bool"
    ),
    **_distances("to_reference", "exact EM's fit"),
    **_distances("to_truth", "the generating model"),
    "held_out_gap": Variable(
        DIMS,
        "nat",
        "exact EM's final held-out log-likelihood per observed step less the approximate run's",
        missing="both runs rule a held-out sequence out (-inf less -inf)",
    ),
    **status_variables(DIMS),
}


@dataclass(frozen=True)
class LearningRecord(Record):
    """What one cell computes (``tasks.learning_cell``), a field per variable of
    ``VARIABLES`` (whose meaning it has); K the configured iterations."""

    training: np.ndarray  # (K,)
    held_out: np.ndarray  # (K,)
    e_step_seconds: np.ndarray  # (K,)
    m_step_seconds: np.ndarray  # (K,)
    training_exact: np.ndarray  # (K,)
    held_out_exact: np.ndarray  # (K,)
    e_step_seconds_exact: np.ndarray  # (K,)
    m_step_seconds_exact: np.ndarray  # (K,)
    iterations: int
    converged: bool
    to_reference_prior: float
    to_reference_transition_mean: float
    to_reference_transition_max: float
    to_reference_emission_mean: float
    to_reference_emission_max: float
    to_truth_prior: float
    to_truth_transition_mean: float
    to_truth_transition_max: float
    to_truth_emission_mean: float
    to_truth_emission_max: float
    held_out_gap: float


SCHEMA = Schema(
    name="learning",
    dims=DIMS,
    variables=VARIABLES,
    record=LearningRecord,
    coordinates={
        "family": "model family of the generating model",
        "n_states": "number of states n",
        "seed": "seed of the generating model, its data and the start model",
        "sequences": "training sequences",
        "length": "steps of every sequence",
        "method": "the E-step's approximation",
        "setting": "the method's setting (p, k or rank)",
        "iteration": "EM iteration",
    },
    in_grid_dims=("family", "n_states", "method", "setting"),
    in_grid_name="the (family, n_states) and (method, setting) pairs the grid holds",
)


def references(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with the exact-EM series (``EXACT``) reduced to their problem's dims and
    ``iteration`` (they are equal across ``method`` and ``setting``; NaN where no cell of
    the problem is done): the Dataset ``pipeline.learning.summary`` reads."""
    done = ds["done"]
    exact = {name: ds[name].where(done).max(["method", "setting"]) for name in EXACT}
    return ds.drop_vars(list(EXACT)).assign(exact)


def summary(ds: xr.Dataset) -> str:
    """Per family, size, method and setting: the median over the other dims of the final
    held-out gap to exact EM, the transition rows' mean TV to exact EM's fit, and the
    iterations made."""
    ds = ds.load()
    rows = []
    for family in ds["family"].values:
        for n in ds["n_states"].values:
            for method in ds["method"].values:
                for setting in ds["setting"].values:
                    cell = ds.sel(
                        {"family": family, "n_states": n, "method": method, "setting": setting}
                    )
                    if not bool(cell["done"].any()):
                        continue
                    done = cell["done"]
                    rows.append(
                        [
                            str(family),
                            str(int(n)),
                            str(method),
                            f"{setting:g}",
                            shown(_median(cell["held_out_gap"], done), ".4f"),
                            shown(_median(cell["to_reference_transition_mean"], done), ".4f"),
                            shown(_median(cell["iterations"], done), ".0f"),
                        ]
                    )
    header = ["family", "n_states", "method", "setting", "gap", "TV to exact", "iterations"]
    return "Held-out gap to exact EM (nats per step), median over seeds and data:\n" + text_table(
        header, rows
    )


def _median(values: xr.DataArray, done: xr.DataArray) -> float:
    """The median of ``values`` over the done cells; NaN where none is done."""
    kept = np.asarray(values.where(done).values, dtype=float)
    kept = kept[~np.isnan(kept)]
    return float(np.median(kept)) if kept.size else float("nan")
