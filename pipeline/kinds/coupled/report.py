"""Figures and report of a coupled sweep (weakly coupled HMMs).

Accuracy of the structured mean field and the chain-wise Viterbi against the coupling
``eps``; cost per step of exact inference and of one mean-field sweep against chains and
states; the mean-field filter beside top-p on the joint chain, TV against runtime; and a
table per model shape.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from pipeline.analysis.base import Analysis, run_lines, save
from pipeline.results.schema import finite_median

ACCURACY = (
    ("tv_mean_field", "filtered TV, max over t"),
    ("tv_mean_field_smoothed", "smoothed TV, max over t"),
    ("viterbi_hamming", "Viterbi Hamming fraction"),
    ("viterbi_logprob_gap", "Viterbi log-prob gap (nat)"),
)


def shapes(ds: xr.Dataset) -> list[tuple[str, int, int, str]]:
    """The ``(model, chains, n_states, observe)`` the run has, in coordinate order."""
    return [
        (str(m), int(k), int(n), str(o))
        for m in ds["model"].values
        for k in ds["chains"].values
        for n in ds["n_states"].values
        for o in ds["observe"].values
        if bool(ds["in_grid"].sel(model=m, chains=k, n_states=n, observe=o))
    ]


def _cell(ds: xr.Dataset, shape) -> xr.Dataset:
    m, k, n, o = shape
    cell = ds.sel(model=m, chains=k, n_states=n, observe=o)
    return cell.drop_vars("error").where(cell["done"])


def _over_t(values: xr.DataArray) -> xr.DataArray:
    return values.max("t") if "t" in values.dims else values


def _series(ds: xr.Dataset) -> list[tuple[str, xr.Dataset]]:
    """The accuracy figure's lines: the family per chain count and observation, each relational
    spec on its reduced domains (cells with an exact reference), medians over shapes."""
    out = []
    for m in ds["model"].values:
        for k in ds["chains"].values:
            for o in ds["observe"].values:
                exists = ds["in_grid"].sel(model=m, chains=k, observe=o)
                if not exists.any():
                    continue
                cells = ds.sel(model=m, chains=k, observe=o).drop_vars("error")
                label = (
                    f"{'' if m == 'coupled' else f'{m} '}k={int(k)}{' set' if o == 'set' else ''}"
                )
                out.append((label, cells.where(cells["done"] & exists)))
    return out


def accuracy_figure(ds: xr.Dataset) -> Figure:
    """Four panels against eps, one line per chain count and observation (median over states
    per chain and seeds); dashed: the set observation."""
    figure = Figure(figsize=(11, 7.5), layout="constrained")
    axes = figure.subplots(2, 2).ravel()
    figure.suptitle("Accuracy against coupling eps (median over n and seeds; dashed: set observed)")
    series = _series(ds)
    bases = list(dict.fromkeys(label.removesuffix(" set") for label, _ in series))
    colours = {label: f"C{bases.index(label.removesuffix(' set'))}" for label, _ in series}
    for axis, (name, title) in zip(axes, ACCURACY, strict=True):
        for label, cells in series:
            line = _over_t(cells[name]).median(("n_states", "seed"))
            if np.isfinite(line).any():
                style = "--" if label.endswith(" set") else "-"
                axis.plot(
                    ds["eps"], line, style, marker="o", ms=3, color=colours[label], label=label
                )
        axis.set(xlabel="eps", title=title)
    axes[0].legend(fontsize="small", ncol=2)
    return figure


def step_costs(ds: xr.Dataset) -> xr.Dataset:
    """Per shape (median over eps and seeds): seconds per step of exact smoothing (a forward
    and a backward step) and of one mean-field sweep over the chains (smoother only)."""
    steps = ds.sizes["t"]
    per_sweep = ds["runtime_mean_field"] / (ds["iterations"] * steps)
    exact = ds["runtime_exact"] / (2 * steps)
    done = ds["done"]
    return xr.Dataset(
        {
            "exact": exact.where(done).median(("eps", "seed")),
            "mean_field": per_sweep.where(done).median(("eps", "seed")),
        }
    )


def cost_figure(ds: xr.Dataset) -> Figure:
    """Seconds per step against states per chain, one colour per chain count."""
    costs = step_costs(ds.sel(model="coupled", observe="chain"))
    figure = Figure(figsize=(6.8, 4.6), layout="constrained")
    axis = figure.subplots()
    for index, k in enumerate(ds["chains"].values):
        colour = f"C{index}"
        for name, style in (("exact", "-"), ("mean_field", "--")):
            line = costs[name].sel(chains=k)
            keep = np.isfinite(line.values)
            if keep.any():
                axis.plot(
                    ds["n_states"].values[keep],
                    line.values[keep],
                    style,
                    color=colour,
                    marker="o",
                    label=f"k={int(k)} {name.replace('_', ' ')}",
                )
    axis.set(
        xscale="log",
        yscale="log",
        xlabel="states per chain n",
        ylabel="seconds per step",
        title="Exact (structured joint operator) vs one mean-field sweep, per step",
    )
    axis.set_xticks(ds["n_states"].values, [str(n) for n in ds["n_states"].values])
    axis.minorticks_off()
    axis.legend(fontsize="small")
    return figure


def equal_runtime_figure(ds: xr.Dataset) -> Figure:
    """Filtering TV (max over t) against runtime, one panel per chain count: the mean-field
    filter and top-p on the joint chain, every cell with an exact reference a point; ticks at
    the bottom: the exact joint filter's runtimes."""
    chains = ds["chains"].values
    figure = Figure(figsize=(4.2 * len(chains), 4.4), layout="constrained")
    axes = figure.subplots(1, len(chains), sharey=True, squeeze=False)[0]
    figure.suptitle("Mean-field filter vs top-p filtering of the joint chain (every cell a point)")
    for axis, k in zip(axes, chains, strict=True):
        cells = ds.sel(chains=k)
        done = cells["done"]
        axis.scatter(
            cells["runtime_mean_field_filter"].where(done),
            cells["tv_mean_field"].max("t").where(done),
            s=10,
            color="C0",
            label="mean-field filter",
        )
        for index, p in enumerate(ds["p"].values):
            axis.scatter(
                cells["runtime_topp"].sel(p=p).where(done),
                cells["tv_topp"].sel(p=p).max("t").where(done),
                s=10,
                marker="^",
                color=f"C{index + 1}",
                label=f"top-{p:g} on the joint",
            )
        exact = cells["runtime_exact_joint"].where(done)
        axis.scatter(
            exact,
            np.full(exact.shape, 1e-6),
            s=12,
            marker="|",
            color="k",
            label="exact joint filter",
        )
        axis.set(
            xscale="log", yscale="log", xlabel="seconds per filtering run", title=f"k = {int(k)}"
        )
    axes[0].set(ylabel="TV of per-chain marginals, max over t", ylim=(5e-7, 2))
    axes[0].legend(fontsize="small")
    return figure


def _fmt(value: float, spec: str) -> str:
    return "-" if not np.isfinite(value) else format(value, spec)


def table(ds: xr.Dataset) -> str:
    """Markdown: per shape, medians over eps and seeds of accuracy and cost."""
    lines = [
        "| model | k | n | observe | joint states | filtered TV | smoothed TV | top-0.9 TV | "
        "Hamming | gap (nat) | sweeps | exact s | mean field s | chain-wise s | top-p s | done |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for shape in shapes(ds):
        cell = _cell(ds, shape)

        def med(name, c=cell):
            return finite_median(_over_t(c[name]))

        topp = cell["tv_topp"].sel(p=ds["p"].values[0]).max("t") if ds.sizes["p"] else None
        t_topp = cell["runtime_topp"].sel(p=ds["p"].values[0]) if ds.sizes["p"] else None
        done = ds["done"].sel(model=shape[0], chains=shape[1], n_states=shape[2], observe=shape[3])
        lines.append(
            f"| {shape[0]} | {shape[1]} | {shape[2]} | {shape[3]} | {shape[2] ** shape[1]:,} | "
            f"{_fmt(med('tv_mean_field'), '.4f')} | {_fmt(med('tv_mean_field_smoothed'), '.4f')} | "
            f"{_fmt(finite_median(topp) if topp is not None else np.nan, '.4f')} | "
            f"{_fmt(med('viterbi_hamming'), '.3f')} | {_fmt(med('viterbi_logprob_gap'), '.3f')} | "
            f"{_fmt(med('iterations'), '.0f')} | {_fmt(med('runtime_exact'), '.4f')} | "
            f"{_fmt(med('runtime_mean_field'), '.4f')} | {_fmt(med('runtime_viterbi'), '.4f')} | "
            f"{_fmt(finite_median(t_topp) if t_topp is not None else np.nan, '.4f')} | "
            f"{int(done.sum())}/{done.size} |"
        )
    return "\n".join(lines)


def by_eps(ds: xr.Dataset) -> str:
    """Markdown: per observation and eps, medians over the family's shapes and seeds of the TVs
    (max and mean over chains and steps), the Viterbi's and the iterations."""
    family = ds.sel(model="coupled")
    lines = [
        "| observe | eps | filtered TV max | filtered TV mean | smoothed TV max | "
        "smoothed TV mean | Hamming | gap (nat) | sweeps | converged |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for o in family["observe"].values:
        for e in family["eps"].values:
            cell = family.sel(observe=o, eps=e).drop_vars("error")
            cell = cell.where(cell["done"])
            tvs = [
                finite_median(cell[name].max("t") if top else cell[name].mean("t"))
                for name, top in (
                    ("tv_mean_field", True),
                    ("tv_mean_field_chain_mean", False),
                    ("tv_mean_field_smoothed", True),
                    ("tv_mean_field_smoothed_chain_mean", False),
                )
            ]
            lines.append(
                f"| {o} | {e:g} | "
                + " | ".join(_fmt(v, ".4f") for v in tvs)
                + f" | {_fmt(finite_median(cell['viterbi_hamming']), '.3f')} | "
                f"{_fmt(finite_median(cell['viterbi_logprob_gap']), '.3f')} | "
                f"{_fmt(finite_median(cell['iterations']), '.0f')} | "
                f"{_fmt(float(cell['converged'].mean()), '.2f')} |"
            )
    return "\n".join(lines)


def checks(ds: xr.Dataset) -> str:
    """Markdown: what is checked where exact is impossible: the sampled path's log probability
    against the chain-wise Viterbi path's, and the probability each method gives the truth."""
    lines = [
        "| model | k | n | joint states | log P(truth, o) | log P(chain-wise, o) | "
        "log P(exact Viterbi, o) | P(truth) mean field | P(truth) exact |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for shape in shapes(ds):
        if shape[3] != "chain":
            continue
        cell = _cell(ds, shape)
        lines.append(
            f"| {shape[0]} | {shape[1]} | {shape[2]} | {shape[2] ** shape[1]:,} | "
            + " | ".join(
                _fmt(finite_median(cell[name]), spec)
                for name, spec in (
                    ("log_joint_truth", ".1f"),
                    ("log_joint_viterbi", ".1f"),
                    ("log_joint_exact", ".1f"),
                    ("truth_mean_field", ".3f"),
                    ("truth_exact", ".3f"),
                )
            )
            + " |"
        )
    return "\n".join(lines)


def report(ds: xr.Dataset, store: Path, figures: list[str]) -> str:
    attrs = ds.attrs
    done, cells = (
        int(ds["done"].sum()),
        int(ds["in_grid"].sum()) * ds.sizes["eps"] * ds.sizes["seed"],
    )
    return "\n".join(
        [
            f"# Coupled HMMs report: {store}",
            "",
            *run_lines(attrs, f"BLAS threads per worker {attrs.get('worker_blas_threads', '?')}"),
            f"- cells done: {done} of {cells}",
            "",
            "Each cell samples a path of a weakly coupled HMM (k chains of n states, coupling "
            "eps), observes it every few steps and runs: exact filtering, smoothing and Viterbi "
            "on the joint chain (by its structured operator), the mean-field filter and the "
            "structured mean field (each chain with the others as marginals, iterated), the "
            "chain-wise Viterbi (each chain's path with the others fixed, iterated), and top-p "
            "filtering of the joint HMM. TVs are of per-chain marginals, max over chains; the "
            "Viterbi gap is log P(exact path, o) - log P(chain-wise path, o).",
            "",
            "## Per model shape (medians over eps and seeds)",
            "",
            table(ds),
            "",
            "## Against the coupling (the coupled family, medians over shapes and seeds)",
            "",
            by_eps(ds),
            "",
            "## Where exact is impossible: the sampled path and the truth (medians)",
            "",
            checks(ds),
            "",
            "## Figures",
            "",
            *(f"![{name}]({name})\n" for name in figures),
        ]
    )


def analyze(ds: xr.Dataset, store: Path, out: Path) -> Analysis:
    """Write the figures and ``report.md`` of a coupled store to ``out``."""
    figures = {"accuracy.png": accuracy_figure(ds), "equal_runtime.png": equal_runtime_figure(ds)}
    if "coupled" in ds["model"].values and "chain" in ds["observe"].values:
        figures["cost.png"] = cost_figure(ds)
    return save(out, figures, report(ds, store, list(figures)))
