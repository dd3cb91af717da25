"""The store of a coupled sweep (``pipeline.sweep.coupled``): its variables and template.

Every variable has ``units`` and ``long_name``; those measured against exact inference say in
``missing`` why they are NaN where the joint chain is too large for an exact run.
"""

from __future__ import annotations

import xarray as xr

from pipeline.sweep.coupled import DIMS, KIND, CoupledGrid
from pipeline.sweep.store import ResultStore, Variable, kind_template, status_variables

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
    ),
    "runtime_exact_viterbi": Variable(
        CELL, "s", "exact joint Viterbi (the joint matrix in row blocks), median", missing=NO_EXACT
    ),
    "runtime_exact_joint": Variable(
        CELL,
        "s",
        "exact filtering of the dense joint HMM by the compiled recursion (top-p's reference), "
        "median",
        missing=NO_EXACT,
    ),
    "runtime_mean_field": Variable(
        CELL, "s", "structured mean field (smoothing, from the filter's marginals), median"
    ),
    "runtime_mean_field_filter": Variable(
        CELL, "s", "the online structured mean field (filtering), median"
    ),
    "runtime_viterbi": Variable(CELL, "s", "chain-wise Viterbi, median of repeats"),
    "runtime_topp": Variable(
        (*CELL, "p"), "s", "top-p filtering of the joint HMM, median of repeats", missing=NO_EXACT
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


def _template(grid: CoupledGrid, attrs: dict) -> tuple[xr.Dataset, dict]:
    in_grid = xr.Variable(
        ("model", "chains", "n_states", "observe"),
        grid.in_grid,
        {"units": "1", "long_name": "the grid has cells of this model, shape and observation"},
    )
    long_names = {
        "model": "coupled: seeded mixed-memory chains; others: relational specs grounded",
        "chains": "number of chains k",
        "n_states": "states per chain n",
        "eps": "coupling: probability that a chain moves by another chain's state",
        "seed": "seed of the model (coupled) and of the sampled path",
        "observe": "what is observed: chain (every chain's symbol) or set (the set of symbols)",
        "p": "top-p mass of the joint transitions",
        "t": "time step",
    }
    return kind_template(
        grid, VARIABLES, attrs, kind=KIND, long_names=long_names, extra={"in_grid": in_grid}
    )


class CoupledStore(ResultStore):
    """The store of a coupled sweep (``ResultStore`` with this module's variables)."""

    variables = VARIABLES
    template = staticmethod(_template)
