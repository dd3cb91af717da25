"""The store of the methods sweep: approximations against exact inference, cell by cell.

A cell is one ``(family, n_states, method, setting, seed, mode)`` point: one approximate
run against its exact reference. Families may have different sizes and methods different
settings, so the grid need not be a full product: ``in_grid`` over ``(family, n_states,
method, setting)`` marks the cells that exist. Variables over ``MODEL`` are the exact
model's, over ``APPROX`` an approximation's, over ``CELL`` one run's; ``t`` is the time
step. ``summary`` is the table a sweep prints at its end.

The modes (``pipeline.kinds.methods.modes``): ``predict`` (nothing observed) and ``filter``
run the forward recursion, ``P(S_t)`` and ``P(S_t | o_0..o_t)``; ``smooth`` the posteriors of
every step given the whole sequence, ``P(S_t | o_0..o_{T-1})``; ``decode`` the most probable
state path (Viterbi). The modes that observe share one sampled sequence; ``tv`` compares the
beliefs of the cell's mode (in ``smooth`` mode the smoothed posteriors). A variable a mode
does not produce (``Mode.produces``) is NaN for it, and its ``missing`` attribute, written
from the built-in modes' declarations, says so.

This module is longer than most (about 440 lines) because most of it is declaration: 35
variables, each with its meaning and why it may be NaN, and the record a cell fills with
them; a reader of a store finds every one of them here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
import xarray as xr

from pipeline.kinds.methods.modes import BUILTIN as BUILTIN_MODES
from pipeline.kinds.methods.modes import Mode
from pipeline.results.schema import (
    Record,
    Schema,
    Variable,
    finite_median,
    shown,
    status_variables,
    text_table,
)

DIMS = ("family", "n_states", "method", "setting", "seed", "mode")
"""The dimensions of a cell, in the order every result variable uses."""
MODEL = ("family", "n_states", "seed")
APPROX = ("family", "n_states", "method", "setting", "seed")
CELL = DIMS


def _modes(which: Callable[[Mode], bool], *, mode: bool = False) -> str:
    """The built-in modes for which ``which`` holds, as a text names them: "filter, smooth
    and decode"; with ``mode``, "smooth mode", "filter and smooth modes"."""
    names = [name for name, found in BUILTIN_MODES.items() if which(found)]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"{listed} mode{'s' * (len(names) > 1)}" if mode else listed


def _outside(variable: str) -> str:
    """Why ``variable``, a measure of a cell's mode, is NaN in the modes that do not
    produce it."""
    return f"NaN outside {_modes(lambda mode: variable in mode.produces, mode=True)}"


PREDICTION_ONLY = (
    f"NaN in {_modes(lambda mode: mode.observed, mode=True)}: with observations, conditioning can "
    "enlarge an error, so the recursion of Section 4 does not bound it"
)
NO_REFERENCE = (
    "NaN where the model had no exact reference (n_states > exact_max_states; in decode mode "
    "also an exact low-rank model too large for the max-product step, lowrank.MAX_DENSE)"
)
NOT_RUN = "NaN where the approximation has no run in the cell's mode: " + "; ".join(
    f"in {name} mode {mode.unsupported}" for name, mode in BUILTIN_MODES.items() if mode.unsupported
)
UNTIMED = "NaN everywhere in a sweep with timing.enabled=false (accuracy only)"
WHOLE_RUN = (
    f"in {_modes(lambda mode: not mode.stepped, mode=True)}, whose runs have no per-step "
    "clock, the whole run's time at the last step t = horizon and NaN before it"
)
DECODE_ONLY = f"{_outside('paths_equal')}; {NO_REFERENCE}; {NOT_RUN}"


TIMED_IN_ROUNDS = (
    "one exact run a round, shared by every cell of the model, mode and seed, and one run "
    "of each of their approximations, in alternating order, BLAS and numba fixed to "
    "timing.blas_threads threads"
)
"""How the runtimes are taken (``pipeline.sweep.timing.Timing.rounds``)."""


def _runtimes() -> dict[str, Variable]:
    return {
        f"runtime_{run}{suffix}": Variable(
            (*CELL, "t"),
            "s",
            f"cumulative runtime of {what} inference to step t, {statistic} over repeats "
            f"({TIMED_IN_ROUNDS})",
            missing=(
                f"{NO_REFERENCE}; {NOT_RUN}; {WHOLE_RUN}; {UNTIMED}"
                if run == "exact"
                else f"{NOT_RUN}; {WHOLE_RUN}; {UNTIMED}"
            ),
            timed=True,
        )
        for run, what in (("exact", "exact"), ("approx", "approximate"))
        for suffix, statistic in (("", "median"), ("_min", "min"), ("_max", "max"))
    }


VARIABLES: dict[str, Variable] = {
    "tv": Variable(
        (*CELL, "t"),
        "1",
        "total variation TV(P_t, Q_t) between exact and approximate beliefs",
        missing=f"{NO_REFERENCE}; {NOT_RUN}; {_outside('tv')}",
    ),
    "tv_max": Variable(
        CELL,
        "1",
        "largest TV over the steps t = 0..horizon between the exact and the approximate "
        "beliefs of the cell's mode, which reads later observations (smooth: the posteriors "
        f"P(S_t | o_0..o_{{T-1}}); {_modes(lambda mode: 'tv_max' in mode.produces)})",
        missing=f"{_outside('tv_max')}; {NO_REFERENCE}; {NOT_RUN}",
    ),
    "path_disagreement": Variable(
        CELL,
        "1",
        "fraction of the steps t = 0..horizon at which the approximate model's Viterbi path "
        "differs from the exact model's (decode)",
        missing=DECODE_ONLY,
    ),
    "log_probability_gap": Variable(
        CELL,
        "nat",
        "log P(exact path, o) - log P(approximate path, o), both under the exact model, for "
        "the two models' Viterbi paths: >= 0 up to rounding; +inf where the exact model rules "
        "the approximate path out (decode)",
        missing=DECODE_ONLY,
    ),
    "paths_equal": Variable(
        CELL,
        "1",
        "1 where the approximate model's Viterbi path equals the exact model's at every step, "
        "0 where not (decode)",
        missing=DECODE_ONLY,
    ),
    "bound": Variable(
        (*APPROX, "t"),
        "1",
        "bound on the prediction TV: e_t = (1-gamma) e_(t-1) + eps from e_0 = eps_start",
    ),
    "bound_linear": Variable(
        (*APPROX, "t"), "1", "Corollary 1 bound eps_start + t eps on the prediction TV"
    ),
    "bound_mixing": Variable(
        APPROX, "1", "Theorem 4.3 bound max(eps_start, eps)/gamma on the prediction TV"
    ),
    "certificate": Variable(
        (*CELL, "t"),
        "1",
        "online bound on the prediction TV from the approximate run's own errors",
        missing=PREDICTION_ONLY,
    ),
    "eps": Variable(
        APPROX,
        "1",
        "most TV one step adds: max_i TV(T_i, Q_i) over transition rows, plus 1 - p of "
        "belief pruning (Theorem 4.1's 1 - p for top-p)",
    ),
    "eps_start": Variable(
        APPROX, "1", "most TV at step 0: TV of the approximate prior, plus 1 - p of pruning"
    ),
    "eps_mean": Variable(
        APPROX, "1", "mean over rows of TV(T_i, Q_i), plus 1 - p of belief pruning"
    ),
    "gamma": Variable(
        MODEL, "1", "minimal mixing rate of the exact transition matrix (see gamma_exact)"
    ),
    "gamma_exact": Variable(
        MODEL, "1", "gamma is exact; false: it is the Doeblin lower bound", "bool"
    ),
    "doeblin": Variable(MODEL, "1", "Doeblin lower bound sum_j min_i T[i, j] on gamma"),
    "sparsity": Variable(
        APPROX, "1", "fraction of zero entries of the transition matrix the approximate run uses"
    ),
    "stored_entries": Variable(
        APPROX, "1", "numbers stored for the transition matrix the approximate run uses"
    ),
    "work": Variable(
        CELL,
        "1",
        "multiply-adds of an approximate step over the stored entries of the rows of non-zero "
        "states, mean over steps (a CSR layout that steps mostly full columns as a dense panel "
        "also multiplies their zeros)",
        missing=f"{_outside('work')}: it counts the forward recursion's steps",
    ),
    **_runtimes(),
    "repeats": Variable(
        CELL,
        "1",
        "rounds timed: each one exact run and one run of every approximation of the model, "
        "mode and seed (0 with timing.enabled=false, and where the approximation has no run in "
        "the cell's mode)",
    ),
    "speedup": Variable(
        CELL,
        "1",
        "exact over approximate runtime of the whole horizon, median over rounds of the "
        "ratio of the round's two runs",
        missing=f"{NO_REFERENCE}; {NOT_RUN}; {UNTIMED}",
        timed=True,
    ),
    "log_evidence": Variable(
        CELL,
        "nat",
        "log evidence of the observations under the exact model "
        f"({_modes(lambda mode: 'log_evidence' in mode.produces)})",
        missing=f"{_outside('log_evidence')} (predict observes nothing, Viterbi scores paths) "
        "and without an exact reference",
    ),
    "log_evidence_error": Variable(
        CELL,
        "nat",
        "log evidence of the approximate run minus the exact "
        f"({_modes(lambda mode: 'log_evidence_error' in mode.produces)})",
        missing=f"{_outside('log_evidence_error')} (predict observes nothing, Viterbi scores "
        f"paths) and without an exact reference; {NOT_RUN}",
    ),
    "zero_evidence": Variable(
        CELL,
        "1",
        "steps whose observation had zero probability in the approximate run (in decode "
        "mode: that no path could emit)",
        missing=NOT_RUN,
    ),
    "impossible_observations": Variable(
        CELL,
        "1",
        "fraction of observations the approximate emissions make impossible for the state "
        f"that emitted them ({_modes(lambda mode: mode.observed)})",
        missing=f"NaN in {_modes(lambda mode: not mode.observed, mode=True)} (nothing observed)",
    ),
    "build_time_model": Variable(MODEL, "s", "time to build the exact model", timed=True),
    "build_time_approx": Variable(APPROX, "s", "time to build the approximation", timed=True),
    "gamma_time": Variable(MODEL, "s", "time to compute gamma (or its Doeblin bound)", timed=True),
    "memory_peak": Variable(
        CELL,
        "B",
        "peak resident memory of the worker process while the cell ran (its inputs, the "
        "model and approximation, included; the whole process's: another task running beside "
        "it on the same worker counts too)",
        missing="NaN where the operating system does not report it (Linux does)",
    ),
    "memory_estimate": Variable(
        CELL,
        "B",
        "the cell's peak memory as the sweep estimated it before running anything (model and "
        "approximation measured at 1024 and 2048 states and extrapolated, beliefs and the worker "
        "process's own 0.4 GiB)",
        missing="NaN for cells of at most 4096 states and models read from a file",
    ),
    **status_variables(CELL),
}
"""Every variable updated cell by cell; ``done`` is written last."""

MEASURED = frozenset(
    name
    for name in VARIABLES
    if name.startswith(("runtime_", "build_time_", "memory_peak"))
    or name in ("speedup", "repeats", "gamma_time")
)
"""The variables that measure a run (clocks, memory) rather than compute a result: they
differ from run to run; every other variable is the same wherever and however it runs."""


@dataclass(frozen=True)
class MethodsRecord(Record):
    """What one cell computes (``tasks.run_cell``), a field per variable of ``VARIABLES``
    (whose meaning and ``missing`` it has); T = horizon + 1 steps, NaN where the variable
    says."""

    tv: np.ndarray  # (T,)
    tv_max: float
    path_disagreement: float
    log_probability_gap: float
    paths_equal: float  # 1 or 0, NaN outside decode
    bound: np.ndarray  # (T,)
    bound_linear: np.ndarray  # (T,)
    bound_mixing: float
    certificate: np.ndarray  # (T,)
    eps: float
    eps_start: float
    eps_mean: float
    gamma: float
    gamma_exact: float  # 1 or 0: stored as a bool
    doeblin: float
    sparsity: float
    stored_entries: int
    work: float
    runtime_exact: np.ndarray  # (T,), median over rounds
    runtime_exact_min: np.ndarray  # (T,)
    runtime_exact_max: np.ndarray  # (T,)
    runtime_approx: np.ndarray  # (T,), median over rounds
    runtime_approx_min: np.ndarray  # (T,)
    runtime_approx_max: np.ndarray  # (T,)
    repeats: int
    speedup: float
    log_evidence: float
    log_evidence_error: float
    zero_evidence: float  # a count, NaN where the approximation has no run
    impossible_observations: float
    build_time_model: float
    build_time_approx: float
    gamma_time: float
    memory_peak: float
    memory_estimate: float


SCHEMA = Schema(
    name="methods",
    dims=DIMS,
    variables=VARIABLES,
    record=MethodsRecord,
    coordinates={
        "n_states": "number of hidden states",
        "method": "approximation method",
        "setting": "the method's setting",
        "t": "time step",
    },
    in_grid_dims=("family", "n_states", "method", "setting"),
    in_grid_name="the grid has this size for the family and setting for the method",
)


def models(ds: xr.Dataset) -> list[tuple[str, int]]:
    """The ``(family, n_states)`` pairs the run has, in coordinate order."""
    exists = ds["in_grid"].any(("method", "setting"))
    return [
        (str(family), int(n))
        for family in ds["family"].values
        for n in ds["n_states"].values
        if bool(exists.sel(family=family, n_states=n))
    ]


def variants(ds: xr.Dataset) -> list[tuple[str, float]]:
    """The ``(method, setting)`` pairs the run has, in coordinate order."""
    exists = ds["in_grid"].any(("family", "n_states"))
    return [
        (str(method), float(setting))
        for method in ds["method"].values
        for setting in ds["setting"].values
        if bool(exists.sel({"method": method, "setting": setting}))
    ]


def cells(ds: xr.Dataset) -> list[dict]:
    """Every (family, n_states, method, setting) the grid has, as a ``sel`` mapping."""
    return [
        {"family": family, "n_states": n, "method": method, "setting": setting}
        for family, n in models(ds)
        for method, setting in variants(ds)
        if bool(
            ds["in_grid"].sel(
                {"family": family, "n_states": n, "method": method, "setting": setting}
            )
        )
    ]


def summary(ds: xr.Dataset) -> str:
    """Per model, method and setting: the speedup per mode, TV and its bound at the last step.

    Speedup is exact over approximate runtime; TV and the recursive bound are for
    prediction; each is the median over seeds of done cells, ``-`` where none was measured (a
    method without a run in the mode, an untimed or unfinished cell, a grid without
    ``predict`` for the TV), never ``nan``.
    """
    last = ds.isel(t=-1).load()
    modes = [str(m) for m in ds["mode"].values]
    header = [
        "family",
        "n_states",
        "method",
        "setting",
        *(f"speedup {m}" for m in modes),
        "tv predict",
        "bound",
        "sparsity",
        "done",
    ]
    rows = []
    for where in cells(ds):
        cell = last.sel(where)
        done = cell["done"]
        speedups = [
            finite_median(cell["speedup"].sel(mode=m).where(done.sel(mode=m))) for m in modes
        ]
        tv = (
            finite_median(cell["tv"].sel(mode="predict").where(done.sel(mode="predict")))
            if "predict" in modes
            else float("nan")
        )
        rows.append(
            [
                where["family"],
                str(where["n_states"]),
                where["method"],
                f"{where['setting']:g}",
                *(f"{s:.2f}x" if np.isfinite(s) else "-" for s in speedups),
                shown(tv, ".4f"),
                shown(finite_median(cell["bound"]), ".4f"),
                shown(finite_median(cell["sparsity"]), ".4f"),
                f"{int(done.sum())}/{done.size}",
            ]
        )
    return "\n".join([text_table(header, rows), *noise_lines(last)])


NOISY = 2.0
"""A cell whose typical (median) timed repeat took more than this many times its fastest is
noisy: its speedup says little (the machine was busy with something else meanwhile). The
slowest repeat is no measure: of thousands of microsecond runs, one meets a pause."""


def noise(last: xr.Dataset) -> tuple[float, float, int, int]:
    """How far apart a run's timed repeats were at the last step ``last``: per timed cell,
    its median repeat over its fastest (the larger of exact's and approximate's); their
    median and maximum, how many cells are noisy (``NOISY``) and how many were timed."""
    done = last["done"] & np.isfinite(last["speedup"])
    # a DataArray (xarray's __array_ufunc__), which numpy's types cannot say
    larger = cast(
        xr.DataArray,
        np.maximum(
            last["runtime_exact"] / last["runtime_exact_min"],
            last["runtime_approx"] / last["runtime_approx_min"],
        ),
    )
    spread = larger.where(done)
    timed = int(done.sum())
    if not timed:
        return float("nan"), float("nan"), 0, 0
    noisy = int((spread > NOISY).sum())
    return float(spread.median()), float(spread.max()), noisy, timed


def noise_lines(last: xr.Dataset) -> list[str]:
    """What the speedups above are worth: nothing for a run that timed nothing, else how far
    apart its repeats were and how many cells' repeats differ more than ``NOISY`` times."""
    median, most, noisy, timed = noise(last)
    if not timed:
        return []
    done = last["done"] & np.isfinite(last["speedup"])
    if float(last["repeats"].where(done).max()) <= 1:  # NaN where none is stored: the spread
        return [
            "speedups are ratios of runs made moments apart: compare them within this run "
            "only. Each was timed once (methods.timing.repeats=1), so nothing here says how noisy "
            "they are."
        ]
    return [
        f"speedups are ratios of runs made moments apart: compare them within this run only. "
        f"A cell's typical repeat took {median:.2f}x its fastest (median over cells; at most "
        f"{most:.1f}x); "
        f"{noisy} of {timed} timed cells more than {NOISY:g}x, their speedup rough "
        "(something else ran meanwhile)."
    ]
