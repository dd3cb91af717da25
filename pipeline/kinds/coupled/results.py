"""The store of the coupled sweep: inference in weakly coupled HMMs (Thon and Kersting,
*Distributed Relational State Representations for Complex Stochastic Processes*).

A cell is one ``(model, chains, n_states, eps, seed, observe)``: one sampled path of a model
of ``chains`` chains of ``n_states`` states each, every method run on it. ``in_grid`` over
``(model, chains, n_states, observe)`` marks the cells that exist. Variables measured
against exact inference say in ``missing`` why they are NaN where the joint chain is too
large for an exact run. ``summary`` is the table a sweep prints at its end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import xarray as xr

from pipeline.results.schema import Record, Schema, Variable, shown, status_variables

DIMS = ("model", "chains", "n_states", "eps", "seed", "observe")
"""The dimensions of a coupled cell."""
CELL = DIMS
NO_EXACT = "NaN where the joint chain has more than exact_max_states states (no exact run)"
VARIABLES: dict[str, Variable] = {
    "tv_mean_field": Variable(
        (*CELL, "t"),
        "1",
        "TV of the online structured mean field's filtered marginals against exact, "
        "max over chains",
        missing=NO_EXACT,
    ),
    "tv_mean_field_smoothed": Variable(
        (*CELL, "t"),
        "1",
        "TV of the structured mean field's smoothed marginals against exact, max over chains",
        missing=NO_EXACT,
    ),
    "tv_mean_field_chain_mean": Variable(
        (*CELL, "t"),
        "1",
        "TV of the online structured mean field's filtered marginals against exact, "
        "mean over chains",
        missing=NO_EXACT,
    ),
    "tv_mean_field_smoothed_chain_mean": Variable(
        (*CELL, "t"),
        "1",
        "TV of the structured mean field's smoothed marginals against exact, mean over chains",
        missing=NO_EXACT,
    ),
    "tv_topp": Variable(
        (*CELL, "p", "t"),
        "1",
        "TV of top-p filtering on the joint chain (per-chain marginals) against exact, max over "
        "chains",
        missing=NO_EXACT,
    ),
    "viterbi_hamming": Variable(
        CELL,
        "1",
        "fraction of chain states where the chain-wise Viterbi path differs from the exact "
        "joint Viterbi path",
        missing=NO_EXACT,
    ),
    "viterbi_logprob_gap": Variable(
        CELL,
        "nat",
        "log P(exact Viterbi path, o) - log P(chain-wise Viterbi path, o), >= 0",
        missing=NO_EXACT,
    ),
    "iterations": Variable(
        CELL, "1", "sweeps over the chains of the structured mean field (smoothing)"
    ),
    "converged": Variable(CELL, "1", "the structured mean field reached its tolerance", "bool"),
    "viterbi_iterations": Variable(CELL, "1", "cycles over the chains of the chain-wise Viterbi"),
    "viterbi_converged": Variable(
        CELL, "1", "the chain-wise Viterbi stopped because no path changed", "bool"
    ),
    "runtime_exact": Variable(
        CELL,
        "s",
        "exact filtering and smoothing on the joint chain by its structured operator, median",
        missing=NO_EXACT,
        timed=True,
    ),
    "runtime_exact_viterbi": Variable(
        CELL,
        "s",
        "exact joint Viterbi (the joint matrix in row blocks), median",
        missing=NO_EXACT,
        timed=True,
    ),
    "runtime_exact_joint": Variable(
        CELL,
        "s",
        "exact filtering of the dense joint HMM by the compiled recursion (top-p's reference), "
        "median",
        missing=NO_EXACT,
        timed=True,
    ),
    "runtime_mean_field": Variable(
        CELL,
        "s",
        "structured mean field (smoothing, from the filter's marginals), median",
        timed=True,
    ),
    "runtime_mean_field_filter": Variable(
        CELL, "s", "the online structured mean field (filtering), median", timed=True
    ),
    "runtime_viterbi": Variable(CELL, "s", "chain-wise Viterbi, median of repeats", timed=True),
    "runtime_topp": Variable(
        (*CELL, "p"),
        "s",
        "top-p filtering of the joint HMM, median of repeats",
        missing=NO_EXACT,
        timed=True,
    ),
    "topp_density": Variable(
        (*CELL, "p"), "1", "fraction of the joint transitions top-p keeps", missing=NO_EXACT
    ),
    "log_joint_truth": Variable(CELL, "nat", "log P(sampled path, o)"),
    "log_joint_viterbi": Variable(CELL, "nat", "log P(chain-wise Viterbi path, o)"),
    "log_joint_exact": Variable(
        CELL, "nat", "log P(exact joint Viterbi path, o)", missing=NO_EXACT
    ),
    "log_evidence": Variable(CELL, "nat", "log P(o) under the exact model", missing=NO_EXACT),
    "truth_mean_field": Variable(
        CELL, "1", "probability the mean field's smoothed marginals give the sampled state, mean"
    ),
    "truth_exact": Variable(
        CELL,
        "1",
        "probability the exact smoothed marginals give the sampled state, mean over chains, steps",
        missing=NO_EXACT,
    ),
    "n_joint": Variable(CELL, "1", "joint states n_states ** chains"),
    **status_variables(CELL),
}


@dataclass(frozen=True)
class CoupledRecord(Record):
    """What one cell computes (``tasks.compare``), a field per variable of ``VARIABLES``
    (whose meaning it has); T = horizon + 1 steps, P top-p masses. What is measured against
    exact inference is NaN where the joint chain is too large for it (the default)."""

    iterations: int
    converged: float  # 1 or 0: stored as a bool
    viterbi_iterations: int
    viterbi_converged: float  # 1 or 0: stored as a bool
    runtime_mean_field: float
    runtime_mean_field_filter: float
    runtime_viterbi: float
    log_joint_truth: float
    log_joint_viterbi: float
    truth_mean_field: float
    n_joint: int
    tv_mean_field: np.ndarray | float = math.nan  # (T,)
    tv_mean_field_smoothed: np.ndarray | float = math.nan  # (T,)
    tv_mean_field_chain_mean: np.ndarray | float = math.nan  # (T,)
    tv_mean_field_smoothed_chain_mean: np.ndarray | float = math.nan  # (T,)
    tv_topp: np.ndarray | float = math.nan  # (P, T)
    runtime_topp: np.ndarray | float = math.nan  # (P,)
    topp_density: np.ndarray | float = math.nan  # (P,)
    runtime_exact: float = math.nan
    runtime_exact_viterbi: float = math.nan
    runtime_exact_joint: float = math.nan
    viterbi_hamming: float = math.nan
    viterbi_logprob_gap: float = math.nan
    log_joint_exact: float = math.nan
    log_evidence: float = math.nan
    truth_exact: float = math.nan


SCHEMA = Schema(
    name="coupled",
    dims=DIMS,
    variables=VARIABLES,
    record=CoupledRecord,
    coordinates={
        "model": "coupled: seeded mixed-memory chains; others: relational specs grounded",
        "chains": "number of chains k",
        "n_states": "states per chain n",
        "eps": "coupling: probability that a chain moves by another chain's state",
        "seed": "seed of the model (coupled) and of the sampled path",
        "observe": "what is observed: chain (every chain's symbol) or set (the set of symbols)",
        "p": "top-p mass of the joint transitions",
        "t": "time step",
    },
    in_grid_dims=("model", "chains", "n_states", "observe"),
    in_grid_name="the grid has cells of this model, shape and observation",
)


def summary(ds: xr.Dataset) -> str:
    """One line per (model, chains, n_states, observe): medians over eps and seeds, ``-``
    where none was measured (no exact run beyond ``exact_max_states``, no cell done)."""
    ds = ds.load()
    lines = [
        f"{'model':>15} {'k':>2} {'n':>4} {'observe':>7} {'joint':>8} {'tv mf':>7} "
        f"{'hamming':>8} {'gap nat':>8} {'mf s':>8} {'exact s':>8} {'done':>7}"
    ]
    for m in ds["model"].values:
        for k in ds["chains"].values:
            for n in ds["n_states"].values:
                for o in ds["observe"].values:
                    if not bool(ds["in_grid"].sel(model=m, chains=k, n_states=n, observe=o)):
                        continue
                    cell = ds.sel(model=m, chains=k, n_states=n, observe=o)
                    done = cell["done"]

                    def median(name, c=cell, d=done):
                        v = c[name].where(d)
                        return float(v.max("t").median()) if "t" in v.dims else float(v.median())

                    lines.append(
                        f"{m!s:>15} {int(k):>2} {int(n):>4} {o!s:>7} {int(n) ** int(k):>8} "
                        f"{shown(median('tv_mean_field'), '.3f'):>7} "
                        f"{shown(median('viterbi_hamming'), '.3f'):>8} "
                        f"{shown(median('viterbi_logprob_gap'), '.3f'):>8} "
                        f"{shown(median('runtime_mean_field'), '.4f'):>8} "
                        f"{shown(median('runtime_exact'), '.4f'):>8} "
                        f"{int(done.sum()):>3}/{done.size:<3}"
                    )
    return "\n".join(lines)
