"""Figures and report of a kernel-features sweep: how many random features a softmax over n
states needs (Chiu, Deng and Rush, Section 6).

The main figure draws, per temperature, the smallest feature count F whose median row TV
is at most the threshold against the number of states; the second draws the median row TV
against F for every state count.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from pipeline.analysis.base import Analysis, run_lines, save
from pipeline.kinds.kernel_features.results import features_needed, summary, threshold_of

LINES = {"positive": "-", "fourier": "--"}
"""Line style per feature map (other maps: dotted)."""


def _log2_axis(axis, values, label: str) -> None:
    axis.set_xscale("log", base=2)
    axis.set_xticks(values, [f"$2^{{{int(np.log2(v))}}}$" for v in values])
    axis.set_xlabel(label)


def needed_figure(ds: xr.Dataset) -> Figure:
    """F for a median row TV <= threshold against n, per temperature and feature map; a
    hollow marker above the largest F where no F reaches it (one height per temperature
    and map, so none hides another)."""
    threshold = threshold_of(ds)
    needed = features_needed(ds, threshold)
    top = float(ds["n_features"].max())
    figure = Figure(figsize=(7, 4.6), layout="constrained")
    axis = figure.subplots()
    for k, temperature in enumerate(ds["temperature"].values):
        for m, name in enumerate(ds["feature_map"].values):
            line = needed.sel(temperature=temperature, feature_map=name)
            done = ds["done"].sel(temperature=temperature, feature_map=name)
            axis.plot(ds["n_states"], line, LINES.get(str(name), ":"), marker="o", color=f"C{k}",
                      label=f"{name}, temperature {temperature:g}")  # fmt: skip
            missing = done & line.isnull()
            above = 2 * top * 2 ** (k / 3 + m / 6)
            axis.plot(ds["n_states"][missing], np.full(int(missing.sum()), above),
                      "os"[m % 2], mfc="none", color=f"C{k}")  # fmt: skip
    _log2_axis(axis, ds["n_states"].values, "states n")
    axis.set_yscale("log", base=2)
    axis.axhline(top, color="0.6", lw=0.8)
    axis.set(
        ylabel="features F",
        title=f"Features for a median row TV <= {threshold:g} (hollow: more than {int(top)})",
    )
    axis.legend(fontsize="x-small", ncols=2)
    return figure


def tv_figure(ds: xr.Dataset) -> Figure:
    """Median row TV against F, one panel per temperature, one colour per state count."""
    temperatures = ds["temperature"].values
    figure = Figure(figsize=(4 * len(temperatures), 3.8), layout="constrained")
    axes = figure.subplots(1, len(temperatures), squeeze=False, sharey=True)[0]
    threshold = threshold_of(ds)
    for axis, temperature in zip(axes, temperatures, strict=True):
        for k, n in enumerate(ds["n_states"].values):
            for name in ds["feature_map"].values:
                cell = ds.sel(n_states=n, temperature=temperature, feature_map=name)
                tv = cell["row_tv"].where(cell["done"] & np.isfinite(cell["row_tv"]))
                first = name == ds["feature_map"].values[0]
                axis.plot(ds["n_features"], tv, LINES.get(str(name), ":"), color=f"C{k}",
                          label=f"n = {int(n)}" if first else None)  # fmt: skip
        axis.axhline(threshold, color="0.5", lw=0.8)
        _log2_axis(axis, ds["n_features"].values[::2], "features F")
        axis.set(yscale="log", ylim=(1e-3, 4), title=f"temperature {temperature:g}")
    axes[0].set_ylabel("median row TV (solid: positive, dashed: fourier)")
    axes[-1].legend(fontsize="x-small")
    return figure


def _growth(ds: xr.Dataset, threshold: float) -> list[str]:
    """One line per temperature and map: F needed at the smallest and the largest n."""
    needed = features_needed(ds, threshold)
    small, large = ds["n_states"].values[0], ds["n_states"].values[-1]
    lines = []
    for temperature in ds["temperature"].values:
        for name in ds["feature_map"].values:
            cells = needed.sel(temperature=temperature, feature_map=name)
            a, b = (float(cells.sel(n_states=n)) for n in (small, large))
            tv = ds["row_tv"].sel(temperature=temperature, feature_map=name).isel(n_features=-1)
            if np.isnan(a) and np.isnan(b):
                reading = (
                    f"never reached; at F = {int(ds['n_features'].max())} the median TV is "
                    f"{float(tv.sel(n_states=small)):.3g} (n = {int(small)}) and "
                    f"{float(tv.sel(n_states=large)):.3g} (n = {int(large)})"
                )
            else:
                reading = f"F = {a:.0f} at n = {int(small)}, F = {b:.0f} at n = {int(large)}"
            lines.append(f"- {name}, temperature {temperature:g}: {reading}")
    return lines


def report(ds: xr.Dataset, store: Path, figures: list[str]) -> str:
    threshold = threshold_of(ds)
    return "\n".join(
        [
            f"# Kernel features report: {store}",
            "",
            *run_lines(
                ds.attrs, f"BLAS threads per worker {ds.attrs.get('worker_blas_threads', '?')}"
            ),
            f"- cells done: {int(ds['done'].sum())} of {int(ds['done'].size)}; rows sampled per "
            f"cell: up to {int(ds['rows'].max())}",
            "",
            "Each cell draws Gaussian embeddings of n states whose logits u.v have standard "
            "deviation 1 / temperature, the exact softmax rows of the sampled states, and the "
            "kernel rows of one random feature map (the first F of its features for every F). "
            "`row_tv` is the median over the rows of the TV between the softmax row and the "
            "kernel row normalised by its sum.",
            "",
            "```text",
            summary(ds),
            "```",
            "",
            f"F for a median row TV <= {threshold:g}, at the smallest and the largest n:",
            "",
            *_growth(ds, threshold),
            "",
            "## Figures",
            "",
            *(f"![{name}]({name})\n" for name in figures),
        ]
    )


def analyze(ds: xr.Dataset, store: Path, out: Path) -> Analysis:
    """Write the figures and ``report.md`` of a kernel-features store to ``out``."""
    figures = {"features_needed.png": needed_figure(ds), "row_tv.png": tv_figure(ds)}
    return save(out, figures, report(ds, store, list(figures)))
