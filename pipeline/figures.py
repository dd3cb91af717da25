"""Figures of a results Dataset, readable without the report.

One panel per model (``family``, ``n_states``) and one row per mode; lines
are medians over seeds (and repeats), bands span min to max. Built on
matplotlib's object API (no pyplot state, no display needed).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pipeline.results import models, payoff

MODE_TITLES = {"predict": "prediction", "filter": "filtering"}
PANEL = (3.8, 3.0)  # inches per panel


def _grid(ds: xr.Dataset, title: str):
    """A figure with one panel per model (columns) and mode (rows).

    Returns the figure and its panels as ``(axis, family, n_states, mode)``.
    """
    pairs, modes = models(ds), [str(m) for m in ds["mode"].values]
    figure = Figure(
        figsize=(PANEL[0] * len(pairs), PANEL[1] * len(modes) + 0.6), layout="constrained"
    )
    axes = figure.subplots(len(modes), len(pairs), squeeze=False, sharex=True)
    figure.suptitle(title)
    panels = []
    for row, mode in enumerate(modes):
        for column, (family, n) in enumerate(pairs):
            axis = axes[row, column]
            axis.set_title(f"{family}, n={n}: {MODE_TITLES[mode]}", fontsize=10)
            axis.set_xlabel("time step t")
            panels.append((axis, family, n, mode))
    return figure, panels


def _colour(k: int) -> str:
    return f"C{k + 1}"


def runtime_figure(ds: xr.Dataset) -> Figure:
    """Cumulative runtime against the time step: exact dense vs each top-p (Figures 1, 2)."""
    figure, panels = _grid(
        ds,
        "Cumulative runtime of exact (dense or structured) and top-p (sparse) inference\n"
        "lines: median over repeats and seeds; bands: min to max",
    )
    t = ds["t"].values
    for axis, family, n, mode in panels:
        cell = ds.sel(family=family, n_states=n, mode=mode)
        # Every (p, seed) cell timed the same exact model: pool them.
        axis.plot(t, cell["runtime_dense"].median(("p", "seed")), color="C0", label="exact")
        axis.fill_between(
            t,
            cell["runtime_dense_min"].min(("p", "seed")),
            cell["runtime_dense_max"].max(("p", "seed")),
            color="C0",
            alpha=0.2,
            linewidth=0,
        )
        for k, p in enumerate(ds["p"].values):
            top = cell.sel(p=p)
            axis.plot(
                t,
                top["runtime_sparse"].median("seed"),
                color=_colour(k),
                label=f"top-{p:g} (sparse)",
            )
            axis.fill_between(
                t,
                top["runtime_sparse_min"].min("seed"),
                top["runtime_sparse_max"].max("seed"),
                color=_colour(k),
                alpha=0.2,
                linewidth=0,
            )
        axis.set_yscale("log")
        axis.set_ylabel("cumulative runtime [s]")
    panels[0][0].legend(fontsize="small")
    return figure


def tv_figure(ds: xr.Dataset) -> Figure:
    """Measured TV against the time step with the bounds of Section 4, per p."""
    figure, panels = _grid(
        ds,
        "Total variation between exact and top-p beliefs; bounds (prediction only)\n"
        "solid: measured (median over seeds); thick faint: online certificate; dashed: "
        "recursion; dotted: Corollary 1; dash-dot: Theorem 4.3",
    )
    t = ds["t"].values
    for axis, family, n, mode in panels:
        model = ds.sel(family=family, n_states=n)
        for k, p in enumerate(ds["p"].values):
            cell = model.sel(p=p)
            colour = _colour(k)
            axis.plot(t, cell["tv"].sel(mode=mode).median("seed"), color=colour)
            if mode != "predict":  # the bounds of Section 4 are for prediction
                continue
            certificate = cell["certificate"].sel(mode=mode).median("seed")
            axis.plot(t, certificate, color=colour, linewidth=4, alpha=0.3)
            axis.plot(t, cell["bound"].median("seed"), color=colour, linestyle="--", linewidth=1)
            axis.plot(t, ds["bound_linear"].sel(p=p), color=colour, linestyle=":", linewidth=1)
            axis.axhline(
                float(cell["bound_mixing"].median("seed")),
                color=colour,
                linestyle="-.",
                linewidth=1,
            )
        axis.set_ylim(0, 1.05)
        axis.set_ylabel("total variation")
    handles = [
        Line2D([], [], color=_colour(k), label=f"top-{p:g}") for k, p in enumerate(ds["p"].values)
    ]
    panels[0][0].legend(handles=handles, fontsize="small")
    return figure


def sparsity_speedup_figure(ds: xr.Dataset) -> Figure:
    """Sparsity of the top-p transition matrix and speedup of top-p inference against p."""
    figure = Figure(figsize=(11, 4.5 + 0.25 * len(models(ds))), layout="constrained")
    left, right = figure.subplots(1, 2)
    p = ds["p"].values
    for k, (family, n) in enumerate(models(ds)):
        model = ds.sel(family=family, n_states=n)
        label = f"{family}, n={n}"
        left.plot(p, model["sparsity"].median("seed"), marker="o", color=f"C{k}", label=label)
        for mode, style in (("predict", "-"), ("filter", "--")):
            if mode in ds["mode"].values:
                speedup = model["speedup"].sel(mode=mode).median("seed")
                right.plot(
                    p,
                    speedup,
                    marker="o",
                    linestyle=style,
                    color=f"C{k}",
                    label=f"{label}, {MODE_TITLES[mode]}",
                )
    left.set(
        xlabel="p",
        ylabel="sparsity (fraction of zero entries)",
        title="Sparsity of the top-p transition matrix",
    )
    right.axhline(1, color="grey", linewidth=1)
    right.set(
        xlabel="p",
        ylabel="speedup (exact runtime / top-p runtime)",
        yscale="log",
        title="Speedup of top-p inference over the whole horizon\n"
        "solid: prediction, dashed: filtering; grey: break-even",
    )
    left.legend(fontsize="small")
    handles, labels = right.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=4, fontsize="small")
    return figure


def break_even_text(fit) -> str:
    """The break-even kept fraction of a ``Payoff`` fit, or why there is none."""
    return f"{fit.break_even:.3g}" if np.isfinite(fit.break_even) else "none in range"


def payoff_figure(ds: xr.Dataset) -> Figure:
    """When top-p pays: every done cell's speedup against its fraction of transitions kept.

    One panel per mode, one colour per model, with the least-squares line of
    ``log speedup`` on ``log kept`` and the break-even point where it crosses 1.
    """
    modes = [str(m) for m in ds["mode"].values]
    figure = Figure(figsize=(5.5 * len(modes), 4.8 + 0.25 * len(models(ds))), layout="constrained")
    axes = figure.subplots(1, len(modes), squeeze=False, sharey=True)[0]
    figure.suptitle("When top-p pays: speedup against the fraction of transitions kept")
    for axis, mode in zip(axes, modes, strict=True):
        for k, (family, n) in enumerate(models(ds)):
            cells = payoff(ds.sel(family=family, n_states=n), mode)
            axis.scatter(cells.kept, cells.speedup, color=f"C{k}", s=18, label=f"{family}, n={n}")
        fit = payoff(ds, mode)
        axis.axhline(1, color="grey", linewidth=1)
        if np.isfinite(fit.exponent):
            kept = np.geomspace(fit.kept.min(), fit.kept.max(), 50)
            axis.plot(kept, fit.scale * kept**fit.exponent, color="black", linestyle="--")
        if np.isfinite(fit.break_even):
            axis.axvline(fit.break_even, color="black", linewidth=1, linestyle=":")
        axis.set(
            xscale="log",
            yscale="log",
            xlabel="fraction of transitions kept (1 - sparsity)",
            ylabel="speedup (exact runtime / top-p runtime)",
            title=f"{MODE_TITLES[mode]}: fit speedup = {fit.scale:.3g} kept^{fit.exponent:.2f}\n"
            f"dashed: fit; dotted: break-even at kept = {break_even_text(fit)}; grey: 1x",
        )
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=4, fontsize="small")
    return figure
