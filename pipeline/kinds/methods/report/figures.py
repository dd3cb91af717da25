"""Figures of a methods store, readable without the report.

One panel per model (``family``, ``n_states``) and mode, wrapped into rows of at most
``COLUMNS``; lines are medians over seeds (and repeats), bands span min to max. Each
method has a colour map and a marker, drawn on its lines too; its settings take shades of
the map. Built on
matplotlib's object API (no pyplot state, no display needed).
"""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from pipeline.kinds.methods.modes import lookup
from pipeline.kinds.methods.report.readings import (
    COSTS,
    label,
    mode_title,
    modes_of,
    pareto,
    payoff,
    points,
    stepped,
    stores_tv,
)
from pipeline.kinds.methods.results import models, variants

PANEL = (3.8, 3.0)  # inches per panel
METHOD_STYLES = {
    "topp": ("Blues", "o"),
    "topk": ("Oranges", "s"),
    "topp_states": ("Greens", "^"),
    "topp_transitions": ("GnBu", "p"),
    "topk_transitions": ("YlOrBr", "P"),
    "lowrank": ("Purples", "D"),
    "banded_lowrank": ("Reds", "v"),
}


def styles(ds: xr.Dataset) -> dict[tuple[str, float], dict]:
    """Colour and marker of every ``(method, setting)`` of the run."""
    found = variants(ds)
    out = {}
    for method in dict.fromkeys(m for m, _ in found):
        settings = [s for m, s in found if m == method]
        colours, marker = METHOD_STYLES.get(method, ("Greys", "P"))
        shades = np.linspace(0.45, 0.95, len(settings)) if len(settings) > 1 else [0.75]
        for setting, shade in zip(settings, shades, strict=True):
            out[method, setting] = {"color": mpl.colormaps[colours](shade), "marker": marker}
    return out


COLUMNS = 4
"""Panels side by side at most: more wrap into further rows, so a figure stays readable."""


def _grid(ds: xr.Dataset, title: str, modes: list[str]):
    """A figure with one panel per model and each of ``modes``, the modes of a model side by
    side, wrapped into rows of at most ``COLUMNS`` panels that start with a model.

    Returns the figure and its panels as ``(axis, family, n_states, mode)``.
    """
    pairs = models(ds)
    wanted = [(family, n, mode) for family, n in pairs for mode in modes]
    # as many whole models as fit a row, so a model's modes stay side by side (3 modes: 3)
    whole = max(1, COLUMNS // len(modes)) * len(modes) if len(modes) <= COLUMNS else COLUMNS
    columns = min(whole, len(wanted))
    rows = -(-len(wanted) // columns)
    figure = Figure(figsize=(PANEL[0] * columns, PANEL[1] * rows + 0.8), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    figure.suptitle(title)
    panels = []
    for axis, (family, n, mode) in zip(axes, wanted, strict=False):
        axis.set_title(f"{family}, n={n}: {mode_title(mode)}", fontsize=10)
        panels.append((axis, family, n, mode))
    for axis in axes[len(wanted) :]:
        axis.set_visible(False)
    return figure, panels


def _line(style: dict, t: np.ndarray) -> dict:
    """A method's line: its colour, and its marker at a few steps, so methods of one shade
    are told apart."""
    return {"color": style["color"], "marker": style["marker"], "markevery": max(1, len(t) // 6)}


def legend(
    figure: Figure, ds: xr.Dataset, extra: list | None = None, *, markers: bool = False
) -> None:
    """One entry per method and setting, drawn as the panels draw them: a marker alone
    (``markers``, for scatter plots) or a line."""
    handles = [*(extra or [])] + [
        Line2D(
            [],
            [],
            color=style["color"],
            marker=style["marker"],
            linestyle="" if markers else "-",
            label=label(*variant),
        )
        for variant, style in styles(ds).items()
    ]
    figure.legend(handles=handles, loc="outside lower center", ncols=6, fontsize="small")


NOTHING = "nothing finished or timed here"
"""What a panel with no value to draw on its log axis says (a store still being written,
interrupted, or swept with ``methods.timing.enabled=false``)."""


def log_scale(axis, names: str) -> None:
    """Put the axes ``names`` ("x", "y" or "xy") of a panel on a log scale with readable
    labels where the panel holds a positive value along them; one with none (nothing
    finished or timed: matplotlib cannot draw an empty log axis) stays linear, and the panel
    says so (``NOTHING``)."""
    for name in names:
        if np.isfinite(getattr(axis.dataLim, f"minpos{name}")):
            axis.set(**{f"{name}scale": "log"})
            _readable_log(axis, name)
        elif not axis.texts:
            axis.text(
                0.5, 0.5, NOTHING, transform=axis.transAxes, ha="center", va="center", color="grey"
            )


def _readable_log(axis, name: str) -> None:
    """Labels of the log axis ``name`` ("x" or "y") that never collide: plain numbers, at
    1-2-5 steps where the axis spans less than a decade and a half, at decades otherwise;
    no labels on minor ticks."""
    low, high = getattr(axis, f"get_{name}lim")()
    span = np.log10(high / low) if low > 0 else np.inf
    ticks = getattr(axis, f"{name}axis")
    subs = (1.0, 2.0, 5.0) if span < 1.5 else (1.0,)
    ticks.set_major_locator(LogLocator(base=10, subs=subs, numticks=10))
    ticks.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ticks.set_minor_formatter(NullFormatter())


def runtime_figure(ds: xr.Dataset) -> Figure:
    """Cumulative runtime against the time step: exact vs each approximation (Figures 1, 2),
    for the modes clocked step by step (``Mode.stepped``)."""
    figure, panels = _grid(
        ds,
        "Cumulative runtime of exact and approximate inference\n"
        "lines: median over repeats and seeds; bands: a run's min to max over its repeats "
        "(median over seeds)",
        [mode.name for mode in modes_of(ds, stepped)],
    )
    t = ds["t"].values
    pooled = ("method", "setting", "seed")
    for axis, family, n, mode in panels:
        cell = ds.sel(family=family, n_states=n, mode=mode)
        # Every cell of a model and mode timed the same exact run: pool them.
        # the typical spread of one run's repeats, not the extremes of every run pooled
        axis.plot(t, cell["runtime_exact"].median(pooled), color="black")
        axis.fill_between(
            t,
            cell["runtime_exact_min"].median(pooled),
            cell["runtime_exact_max"].median(pooled),
            color="black",
            alpha=0.15,
            linewidth=0,
        )
        for (method, setting), style in styles(ds).items():
            one = cell.sel({"method": method, "setting": setting})
            axis.plot(t, one["runtime_approx"].median("seed"), **_line(style, t))
            axis.fill_between(
                t,
                one["runtime_approx_min"].median("seed"),
                one["runtime_approx_max"].median("seed"),
                color=style["color"],
                alpha=0.2,
                linewidth=0,
            )
        axis.set(xlabel="time step t", ylabel="cumulative runtime [s]")
        log_scale(axis, "y")
    legend(figure, ds, [Line2D([], [], color="black", label="exact")])
    return figure


def tv_figure(ds: xr.Dataset) -> Figure:
    """Measured TV against the time step with the bounds of Section 4, per method and setting,
    for the modes that store TV at every step."""
    figure, panels = _grid(
        ds,
        "Total variation between exact and approximate beliefs; bounds (prediction only)\n"
        "solid: measured (median over seeds); thick faint: online certificate; dashed: "
        "recursion; dotted: Corollary 1; dash-dot: Theorem 4.3",
        [mode.name for mode in modes_of(ds, stores_tv)],
    )
    t = ds["t"].values
    for axis, family, n, mode in panels:
        model = ds.sel(family=family, n_states=n)
        for (method, setting), style in styles(ds).items():
            cell = model.sel({"method": method, "setting": setting})
            colour = style["color"]
            axis.plot(t, cell["tv"].sel(mode=mode).median("seed"), **_line(style, t))
            if lookup(mode).observed:  # the bounds of Section 4 are for prediction
                continue
            certificate = cell["certificate"].sel(mode=mode).median("seed")
            axis.plot(t, certificate, color=colour, linewidth=4, alpha=0.3)
            axis.plot(t, cell["bound"].median("seed"), color=colour, linestyle="--", linewidth=1)
            axis.plot(
                t, cell["bound_linear"].median("seed"), color=colour, linestyle=":", linewidth=1
            )
            axis.axhline(
                float(cell["bound_mixing"].median("seed")),
                color=colour,
                linestyle="-.",
                linewidth=1,
            )
        axis.set(ylim=(0, 1.05), xlabel="time step t", ylabel="total variation")
    legend(figure, ds)
    return figure


def _mode_lines_text(ds: xr.Dataset) -> str:
    """What each line style of the run's modes means (``Mode.line``), two modes a line:
    "solid: predict, dashed: filter\ndash-dot: smooth, dotted: decode; grey: 1x"."""
    said = [f"{mode.line_name}: {mode.name}" for mode in modes_of(ds)]
    return "\n".join(", ".join(said[k : k + 2]) for k in range(0, len(said), 2)) + "; grey: 1x"


def sparsity_speedup_figure(ds: xr.Dataset) -> Figure:
    """Top-p: sparsity of the transition matrix and speedup of inference against p."""
    figure = Figure(figsize=(11, 4.5 + 0.25 * len(models(ds))), layout="constrained")
    left, right = figure.subplots(1, 2)
    top = ds.sel({"method": "topp"})
    p = [s for m, s in variants(ds) if m == "topp"]
    for k, (family, n) in enumerate(models(ds)):
        model = top.sel(family=family, n_states=n, setting=p)
        name = f"{family}, n={n}"
        left.plot(p, model["sparsity"].median("seed"), marker="o", color=f"C{k}", label=name)
        for mode in modes_of(ds):
            speedup = model["speedup"].sel(mode=mode.name).median("seed")
            right.plot(
                p,
                speedup,
                marker="o",
                linestyle=mode.line,
                color=f"C{k}",
                label=f"{name}, {mode.title}",
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
        title="Speedup of top-p inference over the whole horizon\n" + _mode_lines_text(ds),
    )
    log_scale(right, "y")
    left.legend(fontsize="small")
    handles, labels = right.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=4, fontsize="small")
    return figure


def break_even_text(fit) -> str:
    """The break-even kept fraction of a ``Payoff`` fit, or why there is none."""
    return f"{fit.break_even:.3g}" if np.isfinite(fit.break_even) else "none in range"


def payoff_figure(ds: xr.Dataset) -> Figure:
    """When top-p pays: every done top-p cell's speedup against its fraction of transitions kept.

    One panel per mode, one colour per model, with the least-squares line of
    ``log speedup`` on ``log kept`` and the break-even point where it crosses 1.
    """
    modes = [str(m) for m in ds["mode"].values]
    figure = Figure(figsize=(5.5 * len(modes), 4.8 + 0.25 * len(models(ds))), layout="constrained")
    axes = figure.subplots(1, len(modes), squeeze=False, sharey=True)[0]
    figure.suptitle(
        "When top-p pays: speedup against the fraction of transitions kept\n"
        "dashed: least-squares fit; dotted: break-even, where the fit crosses 1x (grey)"
    )
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
        log_scale(axis, "xy")
        axis.set(
            xlabel="fraction of transitions kept (1 - sparsity)",
            ylabel="speedup (exact runtime / top-p runtime)",
            title=f"{mode_title(mode)}: fit speedup = {fit.scale:.3g} kept^{fit.exponent:.2f}\n"
            f"break-even at kept = {break_even_text(fit)}",
        )
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=4, fontsize="small")
    return figure


def pareto_figure(ds: xr.Dataset, cost: str = "runtime") -> Figure:
    """Cost against accuracy: TV at the last step against ``cost`` (``COSTS``: the runtime
    per step, or the entries the approximate transition matrix stores).

    One row per model and one column per mode; one marker per method and
    setting, a black star for exact inference (TV 0, runtime only), the Pareto
    front (the most accurate point at each cost) as a dashed line.
    """
    scale = 1e6 if cost == "runtime" else 1.0
    unit = COSTS[cost] + (" [us]" if cost == "runtime" else "")
    pairs, modes = models(ds), [mode.name for mode in modes_of(ds, stepped)]
    figure = Figure(figsize=(4.6 * len(modes), 3.0 * len(pairs) + 1.4), layout="constrained")
    axes = figure.subplots(len(pairs), len(modes), squeeze=False)
    figure.suptitle(
        f"Cost against accuracy: TV at the last step against {COSTS[cost]} (medians over "
        "seeds)\n"
        + ("black star: exact; " if cost == "runtime" else "")
        + f"dashed: Pareto front, the most accurate method at each {COSTS[cost]}"
    )
    style = styles(ds)
    for row, (family, n) in enumerate(pairs):
        for column, mode in enumerate(modes):
            axis = axes[row, column]
            found = [p for p in points(ds, family, n, mode) if np.isfinite(getattr(p, cost))]
            for point in found:
                x = getattr(point, cost) * scale
                if point.method == "exact":
                    axis.scatter(x, 0.0, marker="*", s=120, color="black")
                else:
                    axis.scatter(x, point.tv, s=36, **style[point.method, point.setting])
            front = pareto(found, cost)
            axis.step(
                [getattr(p, cost) * scale for p in front],
                [p.tv for p in front],
                where="post",
                color="black",
                linestyle="--",
                linewidth=1,
            )
            axis.set(
                xlabel=unit,
                ylabel="TV at the last step",
                title=f"{family}, n={n}: {mode_title(mode)}",
            )
            axis.margins(0.08)  # no marker cut by the frame
            log_scale(axis, "x")
    extra = [Line2D([], [], color="black", marker="*", linestyle="", label="exact")]
    legend(figure, ds, extra if cost == "runtime" else None, markers=True)
    return figure
