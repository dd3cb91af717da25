"""The methods report's sections on the modes that read the whole sequence: smoothing (the
largest TV over steps between exact and approximate posteriors, ``tv_max``) and Viterbi
decoding (how far the approximate path is from the exact one: ``path_disagreement``,
``log_probability_gap``, ``paths_equal``). Each has a table and a figure, medians over the
seeds of done cells, read from the Dataset alone.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from pipeline.kinds.methods.report.figures import legend, log_scale, styles
from pipeline.kinds.methods.report.readings import label
from pipeline.kinds.methods.report.tables import markdown_table
from pipeline.kinds.methods.results import cells, models
from pipeline.results.schema import finite_median


def _median(values) -> float:
    """The median of the values that are not NaN (an infinite gap counts); NaN if none."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(np.median(values)) if values.size else float("nan")


def _done(ds: xr.Dataset, where: dict, mode: str, name: str) -> np.ndarray:
    """``name`` of the done cells of ``where`` in ``mode``, one value per seed (NaN: not
    done)."""
    cell = ds.sel({**where, "mode": mode})
    return cell[name].where(cell["done"]).values


def _speedup(ds: xr.Dataset, where: dict, mode: str) -> str:
    speedup = finite_median(_done(ds, where, mode, "speedup"))
    return f"{speedup:.2f}x" if np.isfinite(speedup) else "-"


def _left_out(count: int) -> list[str]:
    if not count:
        return []
    return [
        "",
        f"{count} of the combinations of model, method and setting have no value and are left "
        "out: belief "
        "pruning (top-p states), which this mode does not do, a model without an exact "
        "reference, or cells not done.",
    ]


def smoothing_table(ds: xr.Dataset) -> str:
    """Per model, method and setting: the largest TV over steps between the exact and the
    approximate smoothed posteriors, beside filtering's TV at the last step (the run's own
    posterior there) where the run filtered, and the speedup of smoothing."""
    last = ds.isel(t=-1)
    filtered = "filter" in ds["mode"].values
    header = ["model", "method", "largest TV over steps", "filtering TV, last step", "speedup"]
    rows, left_out = [], 0
    for where in cells(ds):
        largest = finite_median(_done(ds, where, "smooth", "tv_max"))
        if not np.isfinite(largest):
            left_out += 1
            continue
        tv = finite_median(_done(last, where, "filter", "tv")) if filtered else float("nan")
        rows.append(
            [
                f"{where['family']}, n={where['n_states']}",
                label(where["method"], where["setting"]),
                f"{largest:.3g}",
                f"{tv:.3g}" if np.isfinite(tv) else "-",
                _speedup(ds, where, "smooth"),
            ]
        )
    table = markdown_table(header, rows) if rows else "No smoothing cell has a value."
    return "\n".join([table, *_left_out(left_out)])


def decoding_table(ds: xr.Dataset) -> str:
    """Per model, method and setting: the share of steps where the approximate Viterbi path
    differs from the exact one, the gap of their log probabilities under the exact model
    (medians over seeds; inf: the exact model rules the approximate path out), in how many
    seeds the paths are equal, and the speedup of decoding."""
    header = ["model", "method", "steps whose state differs", "log-prob. gap (nat)"]
    header += ["equal paths (seeds)", "speedup"]
    rows, left_out = [], 0
    for where in cells(ds):
        equal = _done(ds, where, "decode", "paths_equal")
        measured = ~np.isnan(equal)
        if not measured.any():
            left_out += 1
            continue
        differ = finite_median(_done(ds, where, "decode", "path_disagreement"))
        gap = _median(_done(ds, where, "decode", "log_probability_gap"))
        rows.append(
            [
                f"{where['family']}, n={where['n_states']}",
                label(where["method"], where["setting"]),
                f"{differ:.1%}",
                f"{gap:.3g}",
                f"{int(equal[measured].sum())} of {int(measured.sum())}",
                _speedup(ds, where, "decode"),
            ]
        )
    table = markdown_table(header, rows) if rows else "No decoding cell has a value."
    return "\n".join([table, *_left_out(left_out)])


def _per_model(ds: xr.Dataset, axis, name: str, mode: str) -> None:
    """Each (method, setting)'s median over seeds of ``name`` against the model (x, a little
    apart per method and setting), with a bar from the least to the largest seed's value."""
    pairs, found = models(ds), styles(ds)
    offsets = np.linspace(-0.3, 0.3, len(found)) if len(found) > 1 else [0.0]
    for offset, ((method, setting), style) in zip(offsets, found.items(), strict=True):
        for x, (family, n) in enumerate(pairs):
            where = {"family": family, "n_states": n, "method": method, "setting": setting}
            if not bool(ds["in_grid"].sel(where)):
                continue
            values = _done(ds, where, mode, name)
            values = values[np.isfinite(values)]
            if not values.size:
                continue
            axis.plot(
                [x + offset] * 2, [values.min(), values.max()], color=style["color"], linewidth=1
            )
            axis.plot(
                x + offset,
                np.median(values),
                marker=style["marker"],
                color=style["color"],
                linestyle="",
            )
    axis.set_xticks(range(len(pairs)), [f"{family}\nn={n}" for family, n in pairs])
    axis.tick_params(axis="x", labelsize="small")
    axis.set_xlim(-0.6, len(pairs) - 0.4)


def _size(ds: xr.Dataset, panels: int) -> tuple[float, float]:
    return (max(6.0, 1.0 * len(models(ds)) + 2.5) * panels, 5.2)


def smoothing_figure(ds: xr.Dataset) -> Figure:
    """The largest TV over steps between exact and approximate smoothed posteriors, per model
    and method (median over seeds, a bar from the least to the largest seed's)."""
    figure = Figure(figsize=_size(ds, 1), layout="constrained")
    axis = figure.subplots()
    figure.suptitle(
        "Smoothing: largest TV over steps between exact and approximate posteriors "
        "P(S_t | o_0..o_{T-1})\nmarker: median over seeds; bar: least to largest seed "
        "(a value of 0 is not drawn on the log axis)"
    )
    _per_model(ds, axis, "tv_max", "smooth")
    axis.set(ylabel="largest TV over steps")
    log_scale(axis, "y")
    legend(figure, ds, markers=True)
    return figure


def decoding_figure(ds: xr.Dataset) -> Figure:
    """The approximate Viterbi path against the exact one, per model and method: the share of
    steps whose state differs, and the gap of their log probabilities under the exact model
    (an infinite gap is not drawn)."""
    figure = Figure(figsize=_size(ds, 2), layout="constrained")
    left, right = figure.subplots(1, 2)
    figure.suptitle(
        "Viterbi decoding: the approximate model's path against the exact model's\n"
        "marker: median over seeds; bar: least to largest seed"
    )
    _per_model(ds, left, "path_disagreement", "decode")
    left.set(ylabel="share of steps whose state differs", ylim=(-0.03, 1.03))
    left.set_title("steps where the paths differ", fontsize=10)
    _per_model(ds, right, "log_probability_gap", "decode")
    right.set_yscale("symlog", linthresh=0.1)
    # a gap is never below 0 but by rounding; room above the largest
    right.set_ylim(-0.03, max(right.get_ylim()[1], 1.0) * 2)
    right.set(ylabel="log P(exact path, o) - log P(approximate path, o) [nat]")
    right.set_title("log-probability gap under the exact model (0: as probable)", fontsize=10)
    legend(figure, ds, markers=True)
    return figure


SMOOTHING = (
    "Forward-backward with the approximate transitions against exact forward-backward, on "
    "the filtering runs' observations: the largest TV over every step between the posteriors "
    "P(S_t | o_0..o_{T-1}) (medians over seeds), in [smoothing.png](smoothing.png); the TV at "
    "every step is in the TV figure. At the last step the posterior is the filtered belief, "
    "so smoothing's largest TV is at least filtering's last. No bound is stored for smoothed "
    "posteriors: conditioning on later observations can enlarge an error as filtering's can."
)

DECODING = (
    "Viterbi with the approximate model against Viterbi with the exact one, on the same "
    "observations: the share of steps where the two most probable paths differ, and how much "
    "less probable the approximate path is under the exact model (log P(exact path, o) - "
    "log P(approximate path, o), never below 0 up to rounding), in "
    "[decoding.png](decoding.png). A path may differ at many steps and cost little "
    "probability where several paths are almost equally probable."
)


def smoothing_lines(ds: xr.Dataset) -> list[str]:
    """The report's smoothing section, or nothing for a run without the mode."""
    if "smooth" not in ds["mode"].values:
        return []
    return ["## Smoothing", "", SMOOTHING, "", smoothing_table(ds), ""]


def decoding_lines(ds: xr.Dataset) -> list[str]:
    """The report's decoding section, or nothing for a run without the mode."""
    if "decode" not in ds["mode"].values:
        return []
    return ["## Viterbi decoding", "", DECODING, "", decoding_table(ds), ""]


def figures(ds: xr.Dataset) -> dict[str, Figure]:
    """The sequence modes' figures of the run, by file name."""
    found = {}
    if "smooth" in ds["mode"].values:
        found["smoothing.png"] = smoothing_figure(ds)
    if "decode" in ds["mode"].values:
        found["decoding.png"] = decoding_figure(ds)
    return found
