"""Figures and report of a training sweep (HMM LMs, ``pipeline.sweep.kinds.training``).

Validation and test perplexity (at each model's best validation epoch) against states per
parameterisation, beside the Kneser-Ney n-gram lines; seconds per epoch against states;
the convergence curves; and a table that puts every model beside the softmax of its size
and says which stopped early and which ran out of epochs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from pipeline.analysis.figures import Analysis, save
from pipeline.analysis.readings import run_lines
from pipeline.results.base import finite_median
from pipeline.results.training import BASELINES

GIB = 2.0**30


def _at_best(ds: xr.Dataset) -> xr.DataArray:
    """Per cell: the validation perplexity of the best epoch (NaN where not done)."""
    best = ds["best_epoch"].fillna(0).astype(int)
    return ds["perplexity"].isel(epoch=best).where(ds["done"])


def _median(values: xr.DataArray, ds: xr.Dataset) -> xr.DataArray:
    """The median over seeds of the done cells."""
    return values.where(ds["done"]).median("seed")


def _final(ds: xr.Dataset) -> dict[str, xr.DataArray]:
    """Per (n_states, parameterisation), medians over seeds of what the report reads."""
    seconds = ds["epoch_seconds"].median("epoch")
    return {
        "validation": _median(_at_best(ds), ds),
        "test": _median(ds["test_perplexity"], ds),
        "seconds": _median(seconds, ds),
        "rate": _median(ds["tokens_per_second"], ds),
        "bytes": _median(ds["training_bytes"], ds),
        "rank": _median(ds["transition_rank"], ds),
        "features": _median(ds["n_features"], ds),
    }


def _baselines(ds: xr.Dataset, name: str) -> xr.DataArray:
    """A baseline variable over ``baseline`` (every done cell holds the same values)."""
    return ds[name].where(ds["done"]).max(("n_states", "parameterisation", "seed"))


def _x_axis(axis, ds: xr.Dataset) -> None:
    sizes = ds["n_states"].values
    axis.set_xscale("log", base=2)
    axis.set_xticks(
        sizes, [f"$2^{{{int(np.log2(n))}}}$" if n & (n - 1) == 0 else str(n) for n in sizes]
    )
    axis.set_xlabel("hidden states")


def perplexity_figure(ds: xr.Dataset) -> Figure:
    """Validation and test perplexity against states, one line per parameterisation, the
    Kneser-Ney models as horizontal lines."""
    final = _final(ds)
    figure = Figure(figsize=(11, 4.4), layout="constrained")
    axes = figure.subplots(1, 2, sharey=True)
    for axis, part, baseline in zip(
        axes,
        ("validation", "test"),
        ("baseline_perplexity", "baseline_test_perplexity"),
        strict=True,
    ):
        for name in ds["parameterisation"].values:
            axis.plot(
                ds["n_states"], final[part].sel(parameterisation=name), marker="o", label=str(name)
            )
        lines = _baselines(ds, baseline)
        for k, kn in enumerate(BASELINES):
            value = float(lines.sel(baseline=kn))
            if np.isfinite(value):
                style = (0, (1 + 2 * k, 2))
                axis.axhline(value, color="0.4", lw=1, ls=style, label=f"Kneser-Ney {kn[2:]}-gram")
        _x_axis(axis, ds)
        axis.set(yscale="log", title=f"{part} perplexity at the best validation epoch")
    axes[0].set_ylabel("perplexity")
    axes[0].legend(fontsize="small")
    return figure


def seconds_figure(ds: xr.Dataset) -> Figure:
    """Seconds per training epoch against states (median over epochs and seeds)."""
    seconds = _final(ds)["seconds"]
    figure = Figure(figsize=(6.4, 4.4), layout="constrained")
    axis = figure.subplots()
    for name in ds["parameterisation"].values:
        axis.plot(ds["n_states"], seconds.sel(parameterisation=name), marker="o", label=str(name))
    _x_axis(axis, ds)
    axis.set(
        yscale="log", ylabel="seconds per epoch", title="Training time per epoch against states"
    )
    axis.legend(fontsize="small")
    return figure


def curves_figure(ds: xr.Dataset) -> Figure:
    """Validation perplexity after each epoch, one panel per state count."""
    sizes = ds["n_states"].values
    columns = min(len(sizes), 3)
    rows = -(-len(sizes) // columns)
    figure = Figure(figsize=(4.2 * columns, 3.3 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    figure.suptitle("Convergence: validation perplexity after each epoch (median over seeds)")
    for axis, n in zip(axes, sizes, strict=False):
        for k, name in enumerate(ds["parameterisation"].values):
            cell = ds.sel(n_states=n, parameterisation=name)
            curve = cell["perplexity"].where(cell["done"]).median("seed")
            if np.isfinite(curve).any():
                axis.plot(ds["epoch"][1:], curve[1:], marker=".", color=f"C{k}", label=str(name))
        axis.set(title=f"{int(n)} states", xlabel="epoch", yscale="log")
        axis.xaxis.get_major_locator().set_params(integer=True)
    for axis in axes[len(sizes) :]:
        axis.set_visible(False)
    axes[0].set_ylabel("validation perplexity")
    axes[0].legend(fontsize="small")
    return figure


def _stopping(ds: xr.Dataset, n, name, max_epochs: int) -> str:
    """How the cells of (n, name) ended: stopped early, or ran out of epochs still improving."""
    cell = ds.sel(n_states=n, parameterisation=name)
    done = cell["done"].values
    best, epochs = cell["best_epoch"].values[done], cell["epochs"].values[done]
    if (epochs < max_epochs).all():
        return "early stop"
    return "still improving" if (best == epochs).any() else "max epochs"


def table(ds: xr.Dataset, max_epochs: int) -> str:
    """Markdown: per size and parameterisation, perplexities, epochs, seconds per epoch and
    the softmax's over it, tokens per second, memory and the learned transition's rank."""
    final = _final(ds)
    rows = [
        "| n_states | parameterisation | F | validation | test | best / epochs | how it ended "
        "| s per epoch | softmax / it | inference tokens/s | training GiB | rank > 1e-5 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in ds["n_states"].values:
        for name in ds["parameterisation"].values:
            here = {"n_states": n, "parameterisation": name}
            if not bool(ds["done"].sel(here).any()):
                continue
            cell = ds.sel(here)
            seconds = float(final["seconds"].sel(here))
            softmax = {"n_states": n, "parameterisation": "softmax"}
            has_softmax = "softmax" in ds["parameterisation"].values
            reference = float(final["seconds"].sel(softmax)) if has_softmax else np.nan
            faster = f"{reference / seconds:.2f}x" if np.isfinite(reference) else "-"
            value = {key: float(array.sel(here)) for key, array in final.items()}
            rank = "-" if not np.isfinite(value["rank"]) else int(value["rank"])
            rows.append(
                f"| {int(n)} | {name} | {int(value['features'])} | {value['validation']:.1f} "
                f"| {value['test']:.1f} "
                f"| {int(cell['best_epoch'].max())} / {int(cell['epochs'].max())} "
                f"| {_stopping(ds, n, name, max_epochs)} | {seconds:.3g} | {faster} "
                f"| {value['rate']:,.0f} | {value['bytes'] / GIB:.3g} | {rank} |"
            )
    return "\n".join(rows)


def baseline_table(ds: xr.Dataset) -> str:
    validation = _baselines(ds, "baseline_perplexity")
    test = _baselines(ds, "baseline_test_perplexity")
    rows = ["| interpolated Kneser-Ney | validation | test |", "|---|---|---|"]
    rows += [
        f"| {kn[2:]}-gram | {float(validation.sel(baseline=kn)):.1f} | "
        f"{float(test.sel(baseline=kn)):.1f} |"
        for kn in BASELINES
    ]
    return "\n".join(rows)


def _settings_line(settings: dict) -> str:
    blocks = (
        f"{settings['clusters']} word clusters ({settings['clustering']}), state dropout "
        f"{settings['state_dropout']}"
        if settings.get("clusters")
        else "no blocks (every state emits every word)"
    )
    return (
        f"- training: {blocks}; at most {settings['max_epochs']} epochs, patience "
        f"{settings.get('patience')}; batches of {settings['batch']} chunks of "
        f"{settings['length']} tokens; Adam at {settings['learning_rate']}"
        f"{_decay(settings.get('lr_decay', 1.0))}; softmax up to "
        f"{settings.get('softmax_max_states', '?')} states"
    )


def _decay(decay: float) -> str:
    """How the rate changed after an epoch without a better validation perplexity."""
    if decay == 1:
        return ""
    return f", times {decay} (the best epoch restored) after an epoch that did not improve"


def report(ds: xr.Dataset, store: Path, figures: list[str]) -> str:
    attrs = ds.attrs
    settings = json.loads(attrs.get("grid", "{}"))
    done, cells = int(ds["done"].sum()), int(ds["in_grid"].sum()) * ds.sizes["seed"]
    split = sorted({str(s) for s in ds["split"].values.ravel() if s})
    return "\n".join(
        [
            f"# Training report: {store}",
            "",
            *run_lines(attrs, f"BLAS threads per worker {attrs.get('worker_blas_threads', '?')}"),
            f"- cells done: {done} of {cells}; tokens: training "
            f"{finite_median(ds['train_tokens'].where(ds['done'])):,.0f}, validation "
            f"{finite_median(ds['validation_tokens'].where(ds['done'])):,.0f}, test "
            f"{finite_median(ds['test_tokens'].where(ds['done'])):,.0f}; vocabulary "
            f"{finite_median(ds['vocabulary'].where(ds['done'])):,.0f} words; document split "
            f"{', '.join(split) or '?'}",
            _settings_line(settings),
            "",
            "Each cell trains one HMM LM from a random start by Adam on the evidence (the "
            "gradient of the forward-backward recursion) until its validation perplexity has "
            "not improved for `patience` epochs, or `max_epochs`; validation and test "
            "perplexity are those of the best validation epoch's model. `kernel_<r>` has r "
            "states per feature (F = n / r). 'how it ended': early stop (patience ran out), "
            "max epochs (the best epoch came earlier), still improving (the last epoch was the "
            "best: not converged). Seconds per epoch are the gradient steps only, one BLAS "
            "thread per worker; 'softmax / it' is how many times faster than the softmax of the "
            "same size an epoch runs; training GiB counts the parameters, their two Adam moments, "
            "the best epoch's copy and the per-batch buffers.",
            "",
            table(ds, settings.get("max_epochs", ds.sizes["epoch"] - 1)),
            "",
            baseline_table(ds),
            "",
            "## Figures",
            "",
            *(f"![{name}]({name})\n" for name in figures),
        ]
    )


def analyze(ds: xr.Dataset, store: Path, out: Path) -> Analysis:
    """Write the figures and ``report.md`` of a training store to ``out``."""
    figures = {
        "perplexity.png": perplexity_figure(ds),
        "epoch_seconds.png": seconds_figure(ds),
        "curves.png": curves_figure(ds),
    }
    return save(out, figures, report(ds, store, list(figures)))
