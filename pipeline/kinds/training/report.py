"""Figures and report of a training sweep (HMM LMs).

Validation and test perplexity (at each model's best validation epoch) against states per
parameterisation, beside the modified Kneser-Ney n-gram lines; seconds per epoch against
states; the convergence curves; a table that puts every model beside the softmax of its
size and says how each stopped (early, out of epochs, out of time) and which were grown;
the validation perplexity at equal epochs; and the baselines beside the share of the
held-out n-grams that training holds (how much an n-gram table can recite).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from pipeline.analysis.base import Analysis, run_lines, save
from pipeline.kinds.training.results import BASELINES, NGRAMS
from pipeline.results.schema import finite_median

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
        for k, kn in enumerate(b for b in BASELINES if b.startswith("mkn")):
            value = float(lines.sel(baseline=kn))
            if np.isfinite(value):
                style = (0, (1 + 2 * k, 2))
                label = f"modified Kneser-Ney {kn[3:]}-gram"
                axis.axhline(value, color="0.4", lw=1, ls=style, label=label)
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


_ENDINGS = {"patience": "early stop", "max_epochs": "max epochs", "budget": "time budget"}


def _stopping(ds: xr.Dataset, n, name) -> str:
    """How the cells of (n, name) ended: stopped early, or ran out of epochs or time (still
    improving if the last epoch was the best), and grown from a smaller model."""
    cell = ds.sel(n_states=n, parameterisation=name)
    done = cell["done"].values
    best, epochs = cell["best_epoch"].values[done], cell["epochs"].values[done]
    ending = _ENDINGS.get(str(cell["stopped"].values[done][0]), "?")
    if ending != "early stop" and (best == epochs).any():
        ending += ", still improving"
    grown = int(np.nanmax(cell["grown_from"].values[done]))
    return f"{ending}; grown from {grown}" if grown else ending


def table(ds: xr.Dataset) -> str:
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
                f"| {_stopping(ds, n, name)} | {seconds:.3g} | {faster} "
                f"| {value['rate']:,.0f} | {value['bytes'] / GIB:.3g} | {rank} |"
            )
    return "\n".join(rows)


def equal_epochs_table(ds: xr.Dataset) -> str:
    """Markdown: validation perplexity after each epoch, per parameterisation and size."""
    epochs = [int(e) for e in ds["epoch"].values[1:]]
    curves = ds["perplexity"].where(ds["done"]).median("seed")
    rows = [
        "| parameterisation | n_states | " + " | ".join(f"epoch {e}" for e in epochs) + " |",
        "|---|---|" + "---|" * len(epochs),
    ]
    for name in ds["parameterisation"].values:
        for n in ds["n_states"].values:
            curve = curves.sel(n_states=n, parameterisation=name).values[1:]
            if np.isfinite(curve).any():
                cells = [f"{v:.1f}" if np.isfinite(v) else "-" for v in curve]
                rows.append(f"| {name} | {int(n)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def baseline_table(ds: xr.Dataset) -> str:
    """Markdown: each Kneser-Ney model's validation and test perplexity, and the share of
    the held-out n-grams of its order that occur in training."""
    validation = _baselines(ds, "baseline_perplexity")
    test = _baselines(ds, "baseline_test_perplexity")
    seen = {part: _baselines(ds, f"seen_{part}") for part in ("validation", "test")}
    rows = [
        "| order | interpolated KN validation | test | modified KN validation | test "
        "| held-out n-grams seen in training (validation / test) |",
        "|---|---|---|---|---|---|",
    ]
    for order in sorted({int(b[-1]) for b in BASELINES} | set(NGRAMS)):
        values = []
        for kn in (f"kn{order}", f"mkn{order}"):
            for part in (validation, test):
                known = kn in BASELINES
                values.append(f"{float(part.sel(baseline=kn)):.1f}" if known else "-")
        share = "-"
        if order in NGRAMS:
            share = " / ".join(f"{float(seen[p].sel(ngram=order)):.2%}" for p in seen)
        rows.append(f"| {order} | " + " | ".join(values) + f" | {share} |")
    return "\n".join(rows)


def _settings_line(settings: dict) -> str:
    blocks = (
        f"{settings['clusters']} word clusters ({settings['clustering']}), state dropout "
        f"{settings['state_dropout']}"
        if settings.get("clusters")
        else "no blocks (every state emits every word)"
    )
    budget = settings.get("max_seconds")
    limits = "".join(f"; {k} up to {v} states" for k, v in settings.get("max_states", {}).items())
    return (
        f"- training: {settings.get('corpus') or 'stdlib'} corpus; {blocks}; at most "
        f"{settings['max_epochs']} epochs"
        f"{f' or {budget:g} s' if budget else ''} per cell, patience "
        f"{settings.get('patience')}; batches of {settings['batch']} streams x "
        f"{settings['length']} tokens (the state carried between segments); Adam at "
        f"{settings['learning_rate']}{_decay(settings)}, gradient norm clipped at "
        f"{settings.get('clip')}; kernel features at most {settings.get('max_features')}; "
        f"embedding dimension {settings.get('dim')}{limits}"
        f"{'; each size grown from the half-size model' if settings.get('grow') else ''}"
        f"{_large(settings)}"
    )


def _large(settings: dict) -> str:
    """What ``training.large`` changes for the largest cells (none where it is unset)."""
    if settings.get("large_states") is None:
        return ""
    return (
        f"; from {settings['large_states']} states state dropout "
        f"{settings['large_state_dropout']} and Adam at {settings['large_learning_rate']}"
    )


def _decay(settings: dict) -> str:
    """How the rate changed after epochs without a better validation perplexity."""
    decay = settings.get("lr_decay", 1.0)
    if decay == 1:
        return ""
    patience = settings.get("lr_patience", 1)
    return (
        f", times {decay} (the best epoch restored) after {patience} epoch(s) without a better one"
    )


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
            "Each cell trains one HMM LM (from a random start, or split from the trained model "
            "of half its states) by Adam on the evidence (the gradient of the forward-backward "
            "recursion) until its validation perplexity has not improved for `patience` epochs, "
            "`max_epochs`, or its time budget; validation and test perplexity are those of the "
            "best validation epoch's model, every held-out stream scored from its start with "
            "its state carried throughout (the Kneser-Ney models score the same streams). "
            "`kernel_<r>` has r states per feature (F = min(n / r, max_features)); `neural` "
            "has embeddings through a residual MLP and dot-product logits. 'how it ended': "
            "early stop (patience ran out), max epochs or time budget, 'still improving' when "
            "the last epoch was the best (not converged). Seconds per epoch are the gradient "
            "steps only; 'softmax / it' is how many times faster than the softmax of the same "
            "size an epoch runs; training GiB counts the parameters, their two Adam moments, "
            "the best epoch's copy of all three and the per-batch buffers.",
            "",
            table(ds),
            "",
            "Validation perplexity at equal epochs:",
            "",
            equal_epochs_table(ds),
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
