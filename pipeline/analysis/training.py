"""Figures and report of a training sweep (HMM LMs, ``pipeline.sweep.kinds.training``).

Perplexity against states per parameterisation, seconds per epoch against
states, the convergence curves, and a table that puts every kernel beside the
full softmax of the same size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from pipeline.analysis.figures import Analysis, save
from pipeline.analysis.readings import run_lines
from pipeline.results.base import finite_median


def _final(ds: xr.Dataset, name: str) -> xr.DataArray:
    """Per (n_states, parameterisation): the median over seeds of ``name`` at the last epoch
    (or over epochs, for ``epoch_seconds``), done cells only."""
    values = ds[name].where(ds["done"])
    values = values.median("epoch") if name == "epoch_seconds" else values.isel(epoch=-1)
    return values.median("seed")


def _by_states(ds: xr.Dataset, name: str, ylabel: str, title: str, log_y: bool) -> Figure:
    figure = Figure(figsize=(6.4, 4.4), layout="constrained")
    axis = figure.subplots()
    final = _final(ds, name)
    for parameterisation in ds["parameterisation"].values:
        line = final.sel(parameterisation=parameterisation)
        axis.plot(ds["n_states"], line, marker="o", label=str(parameterisation))
    axis.set(xscale="log", xlabel="hidden states", ylabel=ylabel, title=title)
    if log_y:
        axis.set_yscale("log")
    axis.set_xticks(ds["n_states"].values, [str(n) for n in ds["n_states"].values])
    axis.legend(fontsize="small")
    return figure


def curves_figure(ds: xr.Dataset) -> Figure:
    """Held-out perplexity after each epoch, one panel per state count."""
    sizes = ds["n_states"].values
    figure = Figure(figsize=(3.2 * len(sizes), 3.4), layout="constrained")
    axes = figure.subplots(1, len(sizes), squeeze=False)[0]
    figure.suptitle("Convergence: held-out perplexity after each epoch (median over seeds)")
    for axis, n in zip(axes, sizes, strict=True):
        for parameterisation in ds["parameterisation"].values:
            cell = ds.sel(n_states=n, parameterisation=parameterisation)
            curve = cell["perplexity"].where(cell["done"]).median("seed")
            axis.plot(ds["epoch"], curve, marker=".", label=str(parameterisation))
        axis.set(title=f"{int(n)} states", xlabel="epoch", yscale="log")
    axes[0].set_ylabel("held-out perplexity")
    axes[-1].legend(fontsize="small")
    return figure


def table(ds: xr.Dataset) -> str:
    """Markdown: per size and parameterisation, perplexity, seconds per epoch and inference
    tokens per second, each kernel also as a ratio to the softmax of its size."""
    perplexity, seconds = _final(ds, "perplexity"), _final(ds, "epoch_seconds")
    rate = ds["tokens_per_second"].where(ds["done"]).median("seed")
    features = ds["n_features"].where(ds["done"]).median("seed")
    rows = [
        "| n_states | parameterisation | F | perplexity | vs softmax | s per epoch | "
        "softmax / it | inference tokens/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in ds["n_states"].values:
        base = "softmax" in ds["parameterisation"].values
        for name in ds["parameterisation"].values:
            here = {"n_states": n, "parameterisation": name}
            p, s = float(perplexity.sel(here)), float(seconds.sel(here))
            if not np.isfinite(p):
                continue
            if base:
                reference = {"n_states": n, "parameterisation": "softmax"}
                versus = f"{p / float(perplexity.sel(reference)):.3f}"
                faster = f"{float(seconds.sel(reference)) / s:.2f}x"
            else:
                versus = faster = "-"
            rows.append(
                f"| {int(n)} | {name} | {int(features.sel(here))} | {p:.1f} | {versus} | "
                f"{s:.2f} | {faster} | {float(rate.sel(here)):,.0f} |"
            )
    return "\n".join(rows)


def report(ds: xr.Dataset, store: Path, figures: list[str]) -> str:
    attrs = ds.attrs
    done = int(ds["done"].sum())
    cells = int(ds["done"].size)
    return "\n".join(
        [
            f"# Training report: {store}",
            "",
            *run_lines(attrs, f"BLAS threads per worker {attrs.get('worker_blas_threads', '?')}"),
            f"- cells done: {done} of {cells}; median training tokens per epoch "
            f"{finite_median(ds['train_tokens'].where(ds['done'])):,.0f}",
            "",
            "Each cell trains one HMM LM from a random start by Adam on the evidence (the "
            "gradient of the forward-backward recursion, the same optimiser and learning rate "
            "for every parameterisation) and measures the held-out perplexity after every "
            "epoch. `kernel_<r>` has r states per feature (F = n / r); `banded_kernel_<r>` adds "
            "the band |i - j| < delta of free logits. Seconds per epoch are the gradient steps "
            "only, one BLAS thread per worker; 'softmax / it' is how many times faster than "
            "the softmax of the same size an epoch runs.",
            "",
            table(ds),
            "",
            "## Figures",
            "",
            *(f"![{name}]({name})\n" for name in figures),
        ]
    )


def analyze(ds: xr.Dataset, store: Path, out: Path) -> Analysis:
    """Write the figures and ``report.md`` of a training store to ``out``."""
    figures = {
        "perplexity.png": _by_states(
            ds,
            "perplexity",
            "held-out perplexity",
            "Held-out perplexity after the last epoch against states",
            log_y=False,
        ),
        "epoch_seconds.png": _by_states(
            ds,
            "epoch_seconds",
            "seconds per epoch",
            "Training time per epoch against states",
            log_y=True,
        ),
        "curves.png": curves_figure(ds),
    }
    return save(out, figures, report(ds, store, list(figures)))
