"""The summary table and the Markdown report of a results Dataset, with its figures.

``analyze(store)`` (or ``python -m pipeline.analyze <store>``) writes PNG
figures and a Markdown report next to any sweep's store.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import xarray as xr

from pipeline.analysis.figures import (
    break_even_text,
    pareto_figure,
    payoff_figure,
    runtime_figure,
    sparsity_speedup_figure,
    tv_figure,
)
from pipeline.analysis.paper import PAPER_SIZES, compare
from pipeline.analysis.readings import (
    METHOD_TITLES,
    MODE_TITLES,
    finite_median,
    label,
    models,
    pareto,
    payoff,
    points,
    variants,
)
from pipeline.sweep.store import check_format


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def summary_table(ds: xr.Dataset) -> str:
    """Per model, method and setting: the speedup per mode, TV and its bound at the last step.

    Speedup is exact over approximate runtime; TV and the recursive bound are
    for prediction; each is the median over seeds of done cells.
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
    for family, n in models(ds):
        for method, setting in variants(ds):
            if not bool(
                ds["in_grid"].sel(
                    {"family": family, "n_states": n, "method": method, "setting": setting}
                )
            ):
                continue
            cell = last.sel({"family": family, "n_states": n, "method": method, "setting": setting})
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
                    family,
                    str(n),
                    method,
                    f"{setting:g}",
                    *(f"{s:.2f}x" for s in speedups),
                    f"{tv:.4f}",
                    f"{finite_median(cell['bound']):.4f}",
                    f"{finite_median(cell['sparsity']):.4f}",
                    f"{int(done.sum())}/{done.size}",
                ]
            )
    return _table(header, rows)


def _listed(coordinate: xr.DataArray) -> str:
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in coordinate.values)


def _methods(ds: xr.Dataset) -> str:
    """``topp (0.5, 0.9); topk (5, 20)``: each method with its settings."""
    found = variants(ds)
    return "; ".join(
        f"{method} ({', '.join(f'{s:g}' for m, s in found if m == method)})"
        for method in dict.fromkeys(m for m, _ in found)
    )


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def mixing_table(ds: xr.Dataset) -> str:
    """gamma of every model, and where Theorem 4.3's bound is informative (< 1).

    The bound is ``max(eps_start, eps) / gamma`` (``bound_mixing``) with each
    approximation's measured per-step error ``eps`` (at most ``1 - p`` for top-p)
    and its error at step 0 ``eps_start``.
    """
    found = variants(ds)
    header = ["model", "gamma", "computed as", "Doeblin bound"]
    header += [f"bound, {label(*variant)}" for variant in found]
    rows = []
    for family, n in models(ds):
        model = ds.sel(family=family, n_states=n)
        gamma = finite_median(model["gamma"])
        method = "exact" if bool(model["gamma_exact"].all()) else "Doeblin lower bound"
        cells = []
        for variant_method, setting in found:
            bound = finite_median(
                model["bound_mixing"].sel({"method": variant_method, "setting": setting})
            )
            if np.isnan(bound):
                cells.append("-")
                continue
            cells.append(f"{bound:.5g} ({'informative' if bound < 1 else 'trivial'})")
        doeblin = finite_median(model["doeblin"])
        rows.append([f"{family}, n={n}", f"{gamma:.5g}", method, f"{doeblin:.5g}", *cells])
    return _markdown(header, rows)


def payoff_table(ds: xr.Dataset) -> str:
    """Per mode: how many done top-p cells speed up, the fit of speedup on kept fraction."""
    header = ["mode", "cells", "top-p faster", "fit: speedup =", "break-even kept", "kept"]
    rows = []
    for mode in ds["mode"].values:
        fit = payoff(ds, str(mode))
        span = f"{fit.kept.min():.3g} to {fit.kept.max():.3g}" if fit.kept.size else "-"
        rows.append(
            [
                MODE_TITLES[str(mode)],
                str(fit.kept.size),
                str(int((fit.speedup > 1).sum())),
                f"{fit.scale:.3g} kept^{fit.exponent:.2f}",
                break_even_text(fit),
                span,
            ]
        )
    return _markdown(header, rows)


def _point(point) -> str:
    name = "exact" if point.method == "exact" else label(point.method, point.setting)
    return f"{name} ({point.runtime * 1e6:.3g} us, {point.tv:.3g})"


def front_table(ds: xr.Dataset) -> str:
    """Per model and mode: the Pareto front from the fastest point to exact inference.

    Each listed point is the most accurate method at its runtime per step:
    every faster point has a larger TV at the last step. The last column
    counts how often each method is on the fronts of the family.
    """
    header = ["family", "n_states", "mode", "most accurate at each runtime (us per step, TV)"]
    rows, on_front = [], {}
    for family, n in models(ds):
        for mode in ds["mode"].values:
            front = pareto(points(ds, family, n, str(mode)))
            on_front.setdefault(family, Counter()).update(
                p.method for p in front if p.method != "exact"
            )
            rows.append(
                [family, str(n), MODE_TITLES[str(mode)], " < ".join(_point(p) for p in front)]
            )
    table = _markdown(header, rows)
    summary = [
        f"- {family}: "
        + (
            ", ".join(f"{METHOD_TITLES.get(m, m)} {c}" for m, c in counts.most_common())
            or "no approximation beats exact"
        )
        for family, counts in on_front.items()
    ]
    return table + "\n\nPoints on the fronts, per family:\n\n" + "\n".join(summary)


def _filtering_driver(cell: xr.Dataset) -> str:
    """What the store says drives a filtering error, most telling first."""
    impossible = finite_median(cell["impossible_observations"])
    zero = finite_median(cell["zero_evidence"])
    if impossible > 0:
        return (
            f"its emissions rule out {impossible:.0%} of the observed symbols for the state "
            "that emitted them, so conditioning moves the belief off the truth"
        )
    if zero > 0:
        return f"{zero:g} observations had zero probability under it and were skipped"
    start = finite_median(cell["eps_start"])
    if start > 0.05:
        return f"its prior drops {start:.0%} of the exact prior's mass"
    return "its transitions: errors in the predicted beliefs grow under conditioning"


def filtering_table(ds: xr.Dataset) -> str:
    """Cells whose filtering error at the last step is far above their prediction error.

    Listed: median TV over seeds above 0.2 and 3x the prediction TV. The columns are
    the store's own readings of why: the share of observations the approximate
    emissions make impossible for the state that emitted them, zero-evidence steps,
    and the prior's error.
    """
    if not {"predict", "filter"} <= {str(m) for m in ds["mode"].values}:
        return ""
    header = ["model", "method", "TV filter", "TV predict", "impossible obs.", "zero-ev. steps"]
    header += ["prior error", "what drives it"]
    rows = []
    last = ds.isel(t=-1)
    for family, n in models(ds):
        for method, setting in variants(ds):
            where = {"family": family, "n_states": n, "method": method, "setting": setting}
            if not bool(ds["in_grid"].sel(where)):
                continue
            cell = last.sel(where)
            done = cell["done"]
            filtered = finite_median(cell["tv"].sel(mode="filter").where(done.sel(mode="filter")))
            predicted = finite_median(
                cell["tv"].sel(mode="predict").where(done.sel(mode="predict"))
            )
            if not (filtered > 0.2 and filtered > 3 * predicted):
                continue
            readings = ["impossible_observations", "zero_evidence", "eps_start"]
            one = cell[readings].sel(mode="filter").where(done.sel(mode="filter"))
            rows.append(
                [
                    f"{family}, n={n}",
                    label(method, setting),
                    f"{filtered:.3g}",
                    f"{predicted:.3g}",
                    f"{finite_median(one['impossible_observations']):.0%}",
                    f"{finite_median(one['zero_evidence']):g}",
                    f"{finite_median(cell['eps_start']):.3g}",
                    _filtering_driver(one),
                ]
            )
    if not rows:
        return "No cell's filtering error is above 0.2 and 3x its prediction error."
    return _markdown(header, rows)


def paper_table(rows: list) -> str:
    """This run beside the paper's numbers it has the setting of, matching or differing."""
    header = ["quantity", "model", "p", "mode", "paper", "this run", "", "why it differs"]
    lines = []
    for row in rows:
        claim = row.claim
        ours = (
            "-"
            if not np.isfinite(row.ours)
            else (f"{row.ours:.2f}x" if claim.quantity == "speedup" else f"{row.ours:.4g}")
        )
        mode = "-" if claim.quantity == "sparsity" else MODE_TITLES[claim.mode]
        lines.append(
            [
                claim.quantity,
                f"{row.family}, n={PAPER_SIZES[claim.family]}",
                f"{claim.p:g}",
                mode,
                claim.text,
                ours,
                row.status,
                row.reason,
            ]
        )
    return _markdown(header, lines)


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
    "names the most accurate method at each runtime. What each guarantees: top-p bounds "
    "each row's error by 1 - p and the prediction error by (1 - p)/gamma before anything is "
    "built; top-k guarantees nothing a priori (the mass beyond a row's k largest entries "
    "depends on the row), its bounds use the measured row errors; top-p states (belief "
    "pruning) adds at most 1 - p per step and has the same (1 - p)/gamma bound. With "
    "observations no bound holds for any."
)


def _comparison_lines(ds: xr.Dataset) -> list[str]:
    if len({m for m, _ in variants(ds)}) < 2:
        return []
    return ["## Which approximation pays", "", COMPARISON, "", front_table(ds), ""]


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


def report(ds: xr.Dataset, store: Path, figures: list[str]) -> str:
    """The Markdown report of a run: machine, paper comparison, methods, gamma, summary, figures."""
    attrs = ds.attrs
    cells = int(ds["in_grid"].sum()) * ds.sizes["seed"] * ds.sizes["mode"]
    failed = int(ds["failed"].sum())
    lines = [
        f"# Sweep report: {store}",
        "",
        f"- machine: {attrs.get('host', '?')}: {attrs.get('cpu', '?')}, "
        f"{attrs.get('memory', '?')} memory; BLAS {attrs.get('blas', '?')}",
        f"- Dask: {attrs.get('workers', '?')} workers; BLAS fixed to "
        f"{attrs.get('timing_blas_threads', '?')} thread(s) while timing",
        f"- run: {attrs.get('start_time', '?')} to {attrs.get('end_time', '?')}, "
        f"commit {attrs.get('git_commit', '?')}",
        f"- grid: families {_listed(ds['family'])}; n_states {_listed(ds['n_states'])}; "
        f"methods {_methods(ds)}; horizon {int(ds['t'].values[-1])}; "
        f"seeds {_listed(ds['seed'])}; modes {_listed(ds['mode'])}",
        f"- cells done: {int(ds['done'].sum())} of {cells}"
        + (f"; {failed} failed" if failed else ""),
        "",
        "Speedup is the exact runtime over the approximate runtime of the whole horizon,",
        "measured side by side in one task (median of per-repeat ratios). TV is measured at",
        "the last step against exact inference; the bounds of Section 4 hold for prediction.",
        "",
        "## Beside the paper",
        "",
        *_paper_lines(ds),
        *_comparison_lines(ds),
        *_filtering_lines(ds),
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
        "## Every model, method and setting",
        "",
        "```text",
        summary_table(ds),
        "```",
        "",
        "## Figures",
        "",
        *(f"![{name}]({name})\n" for name in figures),
    ]
    return "\n".join(lines)


def default_output(store: Path) -> Path:
    """Where ``analyze`` writes by default: ``<store's folder>/<store name>_report/``."""
    store = Path(store)
    return store.parent / f"{store.stem}_report"


def analyze(store, out=None) -> Path:
    """Write the figures and the Markdown report of the store at ``store``; return the report.

    ``out`` defaults to ``default_output(store)``, a folder next to the store.
    Raises ``ConfigError`` for a store of another layout.
    """
    store = Path(store)
    ds = xr.open_zarr(store)
    check_format(ds.attrs, store)
    ds = ds.load()
    out = Path(out) if out else default_output(store)
    out.mkdir(parents=True, exist_ok=True)
    figures = {"runtime.png": runtime_figure(ds), "tv.png": tv_figure(ds)}
    if len({m for m, _ in variants(ds)}) > 1:
        figures["pareto.png"] = pareto_figure(ds)
    if any(m == "topp" for m, _ in variants(ds)):
        figures["sparsity_speedup.png"] = sparsity_speedup_figure(ds)
        figures["payoff.png"] = payoff_figure(ds)
    for name, figure in figures.items():
        figure.savefig(out / name, dpi=90)
    path = out / "report.md"
    path.write_text(report(ds, store, list(figures)))
    return path
