"""The report of a methods sweep's store: its figures and Markdown sections.

The tables come from ``tables``, the figures from ``figures`` (a mode's own section and
figures from the mode, ``Mode.section`` and ``Mode.figures``, drawn with this report's
``KIT``), the readings they share from ``readings``, the paper's numbers from ``paper``;
``analyze`` writes them (``pipeline.analysis.analyze`` looks the store's kind up and calls
it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from pipeline.analysis.base import Analysis, run_lines, save
from pipeline.kinds.methods.modes import Kit, Mode
from pipeline.kinds.methods.report.figures import (
    legend,
    log_scale,
    pareto_figure,
    payoff_figure,
    runtime_figure,
    sparsity_speedup_figure,
    styles,
    tv_figure,
)
from pipeline.kinds.methods.report.paper import compare
from pipeline.kinds.methods.report.readings import (
    EXACT_TRANSITIONS,
    label,
    modes_of,
    stepped,
    stores_tv,
)
from pipeline.kinds.methods.report.tables import (
    emissions_table,
    filtering_table,
    front_table,
    markdown_table,
    memory_table,
    mixing_table,
    paper_table,
    payoff_table,
)
from pipeline.kinds.methods.results import cells, models, noise_lines, summary, variants

KIT = Kit(styles, legend, log_scale, label, markdown_table, cells, models)
"""What a mode draws and tabulates its own section with."""


def _sections(ds: xr.Dataset) -> list[Mode]:
    """One mode of the run per registered name (a mode with a setting stands for each of its
    settings the run has), in the run's order: whose section and figures the report has."""
    found: dict[str, Mode] = {}
    for mode in modes_of(ds):
        found.setdefault(mode.registered, mode)
    return list(found.values())


def _listed(coordinate: xr.DataArray) -> str:
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in coordinate.values)


def _methods(ds: xr.Dataset) -> str:
    """``topp (0.5, 0.9); topk (5, 20)``: each method with its settings."""
    found = variants(ds)
    return "; ".join(
        f"{method} ({', '.join(f'{s:g}' for m, s in found if m == method)})"
        for method in dict.fromkeys(m for m, _ in found)
    )


def _paper_lines(ds: xr.Dataset) -> list[str]:
    """The "Beside the paper" section: the table, or one line when nothing is comparable."""
    rows = compare(ds)
    if not rows:
        return [
            "This run has no counterpart in the paper: none of its cells is one of the "
            "paper's models at the paper's size (Bell and Uniform with 800 states, the LM "
            "with 7620) with top-p at p = 0.5, 0.7 or 0.9.",
            "",
        ]
    matched = sum(r.status == "matches" for r in rows)
    differing = sum(r.status == "differs" for r in rows)
    return [
        f"{len(rows)} of the paper's numbers have their setting in this run (the LM's once "
        f"per reading of it): {matched} match, {differing} differ"
        + (
            f", {len(rows) - matched - differing} have no finished cell"
            if matched + differing < len(rows)
            else ""
        )
        + ".",
        "",
        paper_table(rows),
        "",
    ]


COMPARISON = (
    "Every (method, setting) of the run against exact inference, model by model: TV at the "
    "last step against the measured runtime per step (medians over seeds), in "
    "[pareto.png](pareto.png). A point is on the Pareto front when no other point is both "
    "faster and more accurate; the front, read from the fastest point to exact inference, "
    "names the most accurate method at each runtime. What each guarantees: {guarantees}. "
    "With observations no bound holds for any."
)

GUARANTEES = {
    "topp": "top-p bounds each row's error by 1 - p and the prediction error by (1 - p)/gamma "
    "before anything is built",
    "topk": "top-k guarantees nothing a priori (the mass beyond a row's k largest entries "
    "depends on the row), its bounds use the measured row errors",
    "topp_transitions": "top-p transitions alone has top-p's guarantees with an exact prior",
    "topk_transitions": "top-k transitions alone, like top-k, guarantees nothing a priori",
    "topp_states": "top-p states (belief pruning) adds at most 1 - p per step and has the same "
    "(1 - p)/gamma bound",
    "lowrank": "low-rank (the kernel HMMs' factored transitions) guarantees nothing a priori "
    "either (a rank does not bound a row's error), its bounds use the measured row errors",
    "banded_lowrank": "banded low-rank guarantees nothing a priori either (nor does the band), "
    "its bounds use the measured row errors",
}
"""What each built-in method guarantees before anything is built, said of the methods a run
has; a plug-in method gets ``UNKNOWN_GUARANTEE``."""

UNKNOWN_GUARANTEE = (
    "{method} (a plug-in) states no guarantee here; its bounds use the measured row errors"
)

SIZE_COMPARISON = (
    "The same against the memory of the approximation: TV at the last step against the "
    "numbers its transition matrix stores ({stored}), in [pareto_size.png](pareto_size.png). "
    "Exact inference stores the exact model and is left out{pruning}."
)

STORED = {
    "topp": "CSR entries for top-p",
    "topk": "CSR entries for top-k",
    "topp_transitions": "CSR entries for top-p transitions",
    "topk_transitions": "CSR entries for top-k transitions",
    "lowrank": "(2n) r factors for low-rank",
    "banded_lowrank": "(2n) r factors plus the band for banded low-rank",
}
"""What the transition matrix of each method that changes it stores (the others are
``readings.EXACT_TRANSITIONS``); a plug-in method gets ``UNKNOWN_STORED``."""

UNKNOWN_STORED = "the numbers the transition matrix of {method} (a plug-in) stores"


def _comparison_lines(ds: xr.Dataset) -> list[str]:
    if len({m for m, _ in variants(ds)}) < 2 or not modes_of(ds, stepped):
        return []
    methods = list(dict.fromkeys(method for method, _ in variants(ds)))
    pruning = EXACT_TRANSITIONS.intersection(methods)
    return [
        "## Which approximation pays",
        "",
        COMPARISON.format(
            guarantees="; ".join(
                GUARANTEES.get(m, UNKNOWN_GUARANTEE.format(method=m)) for m in methods
            )
        ),
        "",
        front_table(ds),
        "",
        SIZE_COMPARISON.format(
            stored="; ".join(
                STORED.get(m, UNKNOWN_STORED.format(method=m)) for m in methods if m not in pruning
            ),
            pruning=", as is belief pruning, which runs on it" if pruning else "",
        ),
        "",
        front_table(ds, "stored"),
        "",
    ]


def _filtering_lines(ds: xr.Dataset) -> list[str]:
    table = filtering_table(ds)
    if not table:
        return []
    return [
        "## Where filtering goes wrong",
        "",
        "Models, methods and settings whose filtering error at the last step (median over "
        "seeds) is above 0.2 and 3x their prediction error, with the store's readings of "
        "why: `impossible_observations` (the share of observed symbols the approximate "
        "emissions give probability 0 for the state that emitted them: the approximate "
        "model rules out the truth), `zero_evidence` (observations impossible under the "
        "whole approximate belief, skipped) and the prior's error `eps_start`. A method's "
        "failure shows as impossible observations; a model's as neither.",
        "",
        table,
        "",
    ]


def _emissions_lines(ds: xr.Dataset) -> list[str]:
    table = emissions_table(ds)
    if not table:
        return []
    return [
        "## What the truncated emissions cost",
        "",
        "Definition 4 of the top-p paper truncates the prior, the transitions and the "
        "emissions; a truncated emission row gives probability 0 to the symbols beyond its "
        "kept set, so an observation can rule out the state that emitted it (`impossible "
        "obs.`: the share of observed symbols so ruled out). Beside each such method, its "
        "variant that truncates the transitions alone (prior and emissions exact, "
        "`topp_transitions`, `topk_transitions`) at the same setting: filtering TV at the last "
        "step, that of the modes that read later observations (smoothing) at their worst step "
        "(at the last step a smoothed posterior is the filtered one), medians over seeds. The "
        "difference is the error the emissions add; prediction, which reads no emission, "
        "differs only by the prior.",
        "",
        table,
        "",
    ]


def _payoff_lines(ds: xr.Dataset) -> list[str]:
    if not any(m == "topp" for m, _ in variants(ds)):
        return []
    return [
        "## When top-p pays",
        "",
        "Every done top-p cell's speedup against the fraction of transitions its matrix "
        "keeps (1 - sparsity), fitted by least squares on the logarithms over all models and "
        "p of this run. An exponent near -1 says top-p's runtime follows its stored entries; "
        "the break-even kept fraction is where the fit crosses 1x within the kept fractions of "
        "the run: top-p pays below it. "
        "Per-step overheads make small models fall off the line. Where the exact reference "
        "is structured rather than dense, its runtime too follows stored entries, and the "
        "fit says little.",
        "",
        payoff_table(ds),
        "",
    ]


def _memory_lines(ds: xr.Dataset) -> list[str]:
    table = memory_table(ds)
    if not table:
        return []
    return [
        "## Memory",
        "",
        "Before submitting anything the sweep estimates each cell's peak memory (model and "
        "approximation measured at 1024 and 2048 states and extrapolated, the beliefs a run "
        "keeps and a worker's own 0.4 GiB) and refuses a grid whose largest cell, or a "
        "model's timing task (its exact model and every approximation side by side), cannot "
        "fit a worker. Beside it, the "
        "largest peak resident memory a worker process measured while running the cell "
        "(Linux's VmHWM, reset as the cell starts). That peak is the whole worker's: a worker "
        "holding several models (one worker with the machine, `cluster=machine`) counts them "
        "all, so a small cell's peak says what its worker held, and the cell that fits or not "
        "is the largest; `python benchmarks/cell_memory.py` measures cells one process each.",
        "",
        table,
        "",
    ]


def _partial_lines(ds: xr.Dataset, done: int, cells: int) -> list[str]:
    """What the report of a store not finished, or not timed, shows."""
    lines = []
    if done < cells:
        lines.append(
            f"This store is not finished ({done} of {cells} cells done: a sweep is writing it, "
            "or was interrupted): the tables and figures show the done cells, and a model, "
            "method or setting without one is empty (or nan). Run its sweep again to finish it."
        )
    if done and not bool(np.isfinite(ds["runtime_approx"].where(ds["done"])).any()):
        lines.append(
            "No done cell was timed (a sweep with methods.timing.enabled=false): runtimes, "
            "speedups and the runtime fronts are empty; errors, bounds and sizes are complete."
        )
    return [*lines, ""] if lines else []


def report(ds: xr.Dataset, store: Path, figures: list[str]) -> str:
    """The Markdown report of a run: machine, paper comparison, methods, gamma, summary, figures."""
    attrs = ds.attrs
    cells = int(ds["in_grid"].sum()) * ds.sizes["seed"] * ds.sizes["mode"]
    done, failed = int(ds["done"].sum()), int(ds["failed"].sum())
    lines = [
        f"# Sweep report: {store}",
        "",
        *run_lines(
            attrs,
            f"BLAS fixed to {attrs.get('timing_blas_threads', '?')} thread(s) while timing",
        ),
        f"- grid: families {_listed(ds['family'])}; n_states {_listed(ds['n_states'])}; "
        f"methods {_methods(ds)}; horizon {int(ds['t'].values[-1])}; "
        f"seeds {_listed(ds['seed'])}; modes {_listed(ds['mode'])}",
        f"- cells done: {done} of {cells}" + (f"; {failed} failed" if failed else ""),
        "",
        *_partial_lines(ds, done, cells),
        "Speedup is the exact runtime over the approximate runtime of the whole horizon: the",
        "exact run of each model, mode and seed is timed in rounds with every approximation of",
        "its cells, and a cell's speedup is the median of its per-round ratios. TV is measured",
        "at the last step against exact inference; the bounds of Section 4 hold for prediction.",
        *noise_lines(ds.isel(t=-1).load()),
        "",
        "## Beside the paper",
        "",
        *_paper_lines(ds),
        *_comparison_lines(ds),
        *_filtering_lines(ds),
        *_emissions_lines(ds),
        *(line for mode in _sections(ds) for line in mode.section(ds, KIT)),
        *_payoff_lines(ds),
        "## Minimal mixing rate",
        "",
        "Theorem 4.3 bounds the prediction error by max(eps_start, eps)/gamma, where eps is "
        "the most TV one step of the approximation adds (at most 1 - p for top-p) and "
        "eps_start its error at step 0; it says something only where that is below 1. Where "
        "the exact pair search would cost too much, the Doeblin lower bound stands in for "
        "gamma: every bound built on it still holds. The "
        "online certificate (thick faint lines in the TV figure) bounds the prediction error "
        "from each approximate run alone, using the error of every row it reads; it is never "
        "looser than the recursion.",
        "",
        mixing_table(ds),
        "",
        *_memory_lines(ds),
        "## Every model, method and setting",
        "",
        "```text",
        summary(ds),
        "```",
        "",
        "## Figures",
        "",
        *(f"![{name}]({name})\n" for name in figures),
    ]
    return "\n".join(lines)


def analyze(ds: xr.Dataset, store: Path, out: Path) -> Analysis:
    """Write the figures and ``report.md`` of a methods store to ``out``; their paths."""
    clocked = bool(modes_of(ds, stepped))
    figures = {"runtime.png": runtime_figure(ds)} if clocked else {}
    if modes_of(ds, stores_tv):
        figures["tv.png"] = tv_figure(ds)
    if clocked and len({m for m, _ in variants(ds)}) > 1:
        figures["pareto.png"] = pareto_figure(ds)
        figures["pareto_size.png"] = pareto_figure(ds, "stored")
    for mode in _sections(ds):
        figures.update(mode.figures(ds, KIT))
    if any(m == "topp" for m, _ in variants(ds)):
        figures["sparsity_speedup.png"] = sparsity_speedup_figure(ds)
        figures["payoff.png"] = payoff_figure(ds)
    return save(out, figures, report(ds, store, list(figures)))
