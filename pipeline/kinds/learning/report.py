"""Figures and report of a learning sweep: which approximate E-step pays for EM.

Held-out log-likelihood against wall time per method (the Pareto front for learning,
``pipeline.learning.summary.pareto``), convergence curves against exact EM's, the iteration
where an approximate E-step first falls behind exact EM (``divergence``), and the table the
issue asks for: for each family and size, the approximation that reaches within 1% of exact
EM's best held-out log-likelihood in the least time, and the time it saves
(``fastest_within``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from pipeline.analysis.base import Analysis, run_lines, save
from pipeline.kinds.learning.results import references, summary
from pipeline.learning.summary import PROBLEM, TOLERANCE, divergence, fastest_within, pareto
from pipeline.results.schema import shown, text_table


def problems(ds: xr.Dataset) -> list[dict]:
    """The ``PROBLEM`` points (family, n_states, sequences, length) with a done cell."""
    done = ds["done"].any(["seed", "method", "setting"]).transpose(*PROBLEM)
    return [
        {dim: ds[dim][k].item() for dim, k in zip(PROBLEM, index, strict=True)}
        for index in zip(*np.nonzero(done.values), strict=True)
    ]


def _title(problem: dict) -> str:
    return (
        f"{problem['family']} n={problem['n_states']}, "
        f"{problem['sequences']} x {problem['length']} steps"
    )


def _panels(count: int, width: float = 4.2) -> tuple[Figure, np.ndarray]:
    columns = min(count, 3)
    rows = -(-count // columns)
    figure = Figure(figsize=(width * columns, 3.6 * rows), layout="constrained")
    return figure, figure.subplots(rows, columns, squeeze=False).ravel()


def pareto_figure(ds: xr.Dataset, points: list[dict]) -> Figure:
    """Per problem: every (setting, iteration) of each method as held-out log-likelihood
    against seconds of EM (light), its Pareto front (line), exact EM's curve (black)."""
    front = pareto(ds)
    figure, axes = _panels(len(points))
    for axis, problem in zip(axes, points, strict=False):
        here = front.sel(problem)
        for k, method in enumerate(ds["method"].values):
            cell = here.sel({"method": method})
            x, y = cell["elapsed"].values.ravel(), cell["held_out"].values.ravel()
            on = cell["on_front"].values.ravel()
            axis.plot(x, y, ".", color=f"C{k}", alpha=0.25)
            order = np.argsort(x[on])
            axis.plot(x[on][order], y[on][order], "-o", ms=3, color=f"C{k}", label=str(method))
        axis.plot(here["elapsed_exact"], here["held_out_exact"], "k-o", ms=3, label="exact EM")
        axis.set(xscale="log", xlabel="seconds of EM", ylabel="held-out LL (nat/step)")
        axis.set_title(_title(problem), fontsize="small")
    axes[0].legend(fontsize="x-small")
    for axis in axes[len(points) :]:
        axis.set_visible(False)
    return figure


def convergence_figure(ds: xr.Dataset, points: list[dict]) -> Figure:
    """Per problem: held-out log-likelihood against the iteration, median over seeds, for
    every (method, setting) and exact EM."""
    figure, axes = _panels(len(points))
    held = ds["held_out"].median("seed")
    exact = ds["held_out_exact"].median("seed")
    for axis, problem in zip(axes, points, strict=False):
        for k, method in enumerate(ds["method"].values):
            for j, setting in enumerate(ds["setting"].values):
                line = held.sel({**problem, "method": method, "setting": setting})
                if bool(line.notnull().any()):
                    axis.plot(ds["iteration"], line, color=f"C{k}", alpha=0.4 + 0.6 * j / max(
                        1, ds.sizes["setting"] - 1), label=f"{method} {setting:g}")  # fmt: skip
        axis.plot(ds["iteration"], exact.sel(problem), "k-", lw=2, label="exact EM")
        axis.set(xlabel="EM iteration", ylabel="held-out LL (nat/step)")
        axis.set_title(_title(problem), fontsize="small")
    axes[0].legend(fontsize="xx-small", ncols=2)
    for axis in axes[len(points) :]:
        axis.set_visible(False)
    return figure


def fastest_table(ds: xr.Dataset, points: list[dict]) -> str:
    """The issue's table: per problem, the fastest approximation within ``TOLERANCE`` of
    exact EM's best held-out log-likelihood, the time it saves, and whether it pays: "no"
    where exact EM itself reaches the band sooner (the time saved is negative)."""
    best = fastest_within(ds)
    rows = []
    for problem in points:
        row = best.sel(problem)
        method = str(row["method"].item())
        rows.append(
            [
                str(problem["family"]),
                str(problem["n_states"]),
                f"{problem['sequences']} x {problem['length']}",
                f"{method} {float(row['setting']):g}" if method else "none",
                shown(float(row["seconds"]), ".3g"),
                shown(float(row["exact_seconds"]), ".3g"),
                shown(float(row["saved_seconds"]), ".3g"),
                shown(100 * float(row["saved_fraction"]), ".0f"),
                _pays(float(row["saved_seconds"])),
            ]
        )
    header = [
        "family", "n_states", "data", "fastest", "s", "exact s", "saved s", "saved %", "pays"
    ]  # fmt: skip
    return text_table(header, rows)


def _pays(saved: float) -> str:
    """Whether the fastest approximation saves time over exact EM: "-" where none reached the
    band."""
    return "-" if np.isnan(saved) else ("yes" if saved > 0 else "no: exact EM is sooner")


def divergence_table(ds: xr.Dataset, points: list[dict]) -> str:
    """Per problem, method and setting: the earliest iteration over seeds where the
    approximate run's held-out log-likelihood falls more than ``TOLERANCE`` below exact
    EM's ('never' where it does not)."""
    first = divergence(ds).min("seed")
    rows = []
    for problem in points:
        here = first.sel(problem)
        for method in ds["method"].values:
            for setting in ds["setting"].values:
                value = float(here.sel({"method": method, "setting": setting}))
                if np.isnan(value):
                    continue
                shown_value = "never" if np.isinf(value) else f"{value:.0f}"
                rows.append([_title(problem), str(method), f"{setting:g}", shown_value])
    return text_table(["problem", "method", "setting", "falls behind at iteration"], rows)


def _cells(ds: xr.Dataset) -> int:
    """The cells of the grid: its (family, n_states, method, setting) pairs times the seeds
    and data sizes."""
    return int(ds["in_grid"].sum()) * ds.sizes["seed"] * ds.sizes["sequences"] * ds.sizes["length"]


def report(ds: xr.Dataset, store: Path, points: list[dict], figures: list[str]) -> str:
    return "\n".join(
        [
            f"# Learning report: {store}",
            "",
            *run_lines(ds.attrs, "BLAS and numba threads fixed to 1 per task"),
            f"- cells done: {int(ds['done'].sum())} of {_cells(ds)}",
            "",
            "Each problem draws training and held-out sequences from a generating model and a "
            "start model near it (`pipeline.learning.problem`); exact EM runs once per problem, "
            "and each cell runs EM from the same start whose E-step smooths the approximation "
            "of the current model (`pipeline.learning.compare`). Seconds are those of the E- "
            "and M-steps, warm; log-likelihoods are in nats per observed step.",
            "",
            f"## Which approximation reaches within {TOLERANCE:.0%} of exact EM first",
            "",
            "Exact EM's best held-out log-likelihood over its iterations less 1% of its "
            "magnitude is the target; a method counts where it reaches it in every seed, its "
            "time and exact EM's the medians over seeds. Where exact EM reaches the target "
            'sooner than every approximation, the approximation does not pay ("pays": no).',
            "",
            "```text",
            fastest_table(ds, points),
            "```",
            "",
            "## Where an approximate E-step falls behind exact EM",
            "",
            "```text",
            divergence_table(ds, points),
            "```",
            "",
            "## Final held-out gap",
            "",
            "```text",
            summary(ds),
            "```",
            "",
            "## Figures",
            "",
            *(f"![{name}]({name})\n" for name in figures),
        ]
    )


def analyze(ds: xr.Dataset, store: Path, out: Path) -> Analysis:
    """Write the figures and ``report.md`` of a learning store to ``out``."""
    ds = references(ds.load())
    points = problems(ds)
    figures = {
        "pareto.png": pareto_figure(ds, points),
        "convergence.png": convergence_figure(ds, points),
    }
    return save(out, figures, report(ds, store, points, list(figures)))
