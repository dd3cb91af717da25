"""The Markdown tables of a methods sweep's report (the summary is
``pipeline.kinds.methods.results``).

Each reads the Dataset only (medians over seeds of done cells) and returns text.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import xarray as xr

from pipeline.kinds.methods.report.figures import break_even_text
from pipeline.kinds.methods.report.paper import PAPER_SIZES
from pipeline.kinds.methods.report.readings import (
    COSTS,
    METHOD_TITLES,
    label,
    mode_title,
    modes_of,
    pareto,
    payoff,
    points,
    stepped,
    stores_tv,
)
from pipeline.kinds.methods.results import cells, models, variants
from pipeline.results.schema import finite_median


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """``rows`` under ``header`` as a Markdown table."""
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
    return markdown_table(header, rows)


def memory_table(ds: xr.Dataset) -> str:
    """Per estimated model, method and setting: the sweep's estimate of a cell's peak memory
    beside the largest peak a worker measured running one (over seeds and modes); empty
    for a store without estimates (every model of at most 4096 states, or older stores)."""
    if "memory_estimate" not in ds or not np.isfinite(ds["memory_estimate"].values).any():
        return ""
    header = ["model", "method", "estimate (GiB)", "measured peak (GiB)", "measured / estimate"]
    rows = []
    for cell in cells(ds):
        point = ds.sel(cell)
        done = point["done"].values
        estimate = np.nanmax(np.where(done, point["memory_estimate"].values, np.nan), initial=-1)
        peak = np.nanmax(np.where(done, point["memory_peak"].values, np.nan), initial=-1)
        if estimate < 0:
            continue
        measured = f"{peak / 2**30:.2f}" if peak >= 0 else "-"
        ratio = f"{peak / estimate:.2f}" if peak >= 0 else "-"
        model = f"{cell['family']}, n={cell['n_states']}"
        method = label(cell["method"], cell["setting"])
        rows.append([model, method, f"{estimate / 2**30:.2f}", measured, ratio])
    return markdown_table(header, rows) if rows else ""


def payoff_table(ds: xr.Dataset) -> str:
    """Per mode: how many done top-p cells speed up, the fit of speedup on kept fraction."""
    header = ["mode", "cells", "top-p faster", "fit: speedup =", "break-even kept", "kept"]
    rows = []
    for mode in ds["mode"].values:
        fit = payoff(ds, str(mode))
        span = f"{fit.kept.min():.3g} to {fit.kept.max():.3g}" if fit.kept.size else "-"
        rows.append(
            [
                mode_title(str(mode)),
                str(fit.kept.size),
                str(int((fit.speedup > 1).sum())),
                f"{fit.scale:.3g} kept^{fit.exponent:.2f}",
                break_even_text(fit),
                span,
            ]
        )
    return markdown_table(header, rows)


def _point(point, cost: str = "runtime") -> str:
    name = "exact" if point.method == "exact" else label(point.method, point.setting)
    if cost == "runtime":
        return f"{name} ({point.runtime * 1e6:.3g} us, {point.tv:.3g})"
    return f"{name} ({point.stored:.3g}, {point.tv:.3g})"


def front_table(ds: xr.Dataset, cost: str = "runtime") -> str:
    """Per model and mode clocked step by step (``Mode.stepped``): the Pareto front against
    ``cost`` (``COSTS``), cheapest first.

    Each listed point is the most accurate method at its cost: every cheaper
    point has a larger TV at the last step. The last lines count how often
    each method is on the fronts of each family.
    """
    unit = "us per step" if cost == "runtime" else "stored entries"
    header = ["family", "n_states", "mode", f"most accurate at each {COSTS[cost]} ({unit}, TV)"]
    rows = []
    on_front: dict[str, Counter] = {}
    for family, n in models(ds):
        for mode in (m.name for m in modes_of(ds, stepped)):
            front = pareto(points(ds, family, n, str(mode)), cost)
            on_front.setdefault(family, Counter()).update(
                p.method for p in front if p.method != "exact"
            )
            rows.append(
                [
                    family,
                    str(n),
                    mode_title(str(mode)),
                    " < ".join(_point(p, cost) for p in front),
                ]
            )
    table = markdown_table(header, rows)
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
    for where in cells(ds):
        cell = last.sel(where)
        done = cell["done"]
        filtered = finite_median(cell["tv"].sel(mode="filter").where(done.sel(mode="filter")))
        predicted = finite_median(cell["tv"].sel(mode="predict").where(done.sel(mode="predict")))
        if not (filtered > 0.2 and filtered > 3 * predicted):
            continue
        readings = ["impossible_observations", "zero_evidence", "eps_start"]
        one = cell[readings].sel(mode="filter").where(done.sel(mode="filter"))
        rows.append(
            [
                f"{where['family']}, n={where['n_states']}",
                label(where["method"], where["setting"]),
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
    return markdown_table(header, rows)


TRANSITIONS_ONLY = "_transitions"
"""The suffix of the built-in methods that truncate the transitions alone (``topp`` and
``topp_transitions``): a store with both of a pair compares them (``emissions_table``)."""


def emissions_table(ds: xr.Dataset) -> str:
    """In each mode that observes and stores TV, that TV at the last step, or at its worst
    step in a mode that stores it (``tv_max``: smoothing's, as at the last step a smoothed
    posterior is the filtered one), medians over seeds, of each method that truncates prior,
    transitions and emissions beside its variant that truncates the transitions alone, model
    by model and setting by setting: the difference is the error the truncated emissions
    add. Empty when the store has no such pair or no such mode."""
    modes = modes_of(ds, lambda mode: mode.observed and stores_tv(mode))
    pairs = {
        (method, setting)
        for method, setting in variants(ds)
        if (method + TRANSITIONS_ONLY, setting) in set(variants(ds))
    }
    if not modes or not pairs:
        return ""
    header = ["model", "method"]
    for mode in modes:
        worst = " (worst step)" if "tv_max" in mode.produces else ""
        header += [f"TV {mode.title}{worst}", "transitions alone"]
    header.append("impossible obs.")
    rows = []
    last = ds.isel(t=-1)
    for family, n in models(ds):
        for method, setting in sorted(pairs):
            both = [
                {"family": family, "n_states": n, "method": m, "setting": setting}
                for m in (method, method + TRANSITIONS_ONLY)
            ]
            if not all(bool(ds["in_grid"].sel(where)) for where in both):
                continue
            row = [f"{family}, n={n}", label(method, setting)]
            for mode in modes:
                for where in both:
                    if "tv_max" in mode.produces:
                        cell = ds.sel(where).sel(mode=mode.name)
                        tv = cell["tv_max"].where(cell["done"])
                    else:
                        cell = last.sel(where).sel(mode=mode.name)
                        tv = cell["tv"].where(cell["done"])
                    row.append(_number(finite_median(tv)))
            cell = last.sel(both[0]).sel(mode=modes[0].name)
            share = finite_median(cell["impossible_observations"].where(cell["done"]))
            row.append("-" if not np.isfinite(share) else f"{share:.0%}")
            rows.append(row)
    return markdown_table(header, rows) if rows else ""


def _number(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{value:.3g}"


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
        mode = "-" if claim.quantity == "sparsity" else mode_title(claim.mode)
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
    return markdown_table(header, lines)
