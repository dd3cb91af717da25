"""What the report sections of the modes share: a table of a mode's cells, model by model
and method by method, and a figure of one reading per model; medians over the seeds of done
cells, read from the Dataset alone, drawn with the report's ``base.Kit``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from pipeline.results.schema import finite_median

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure

    from pipeline.kinds.methods.modes.base import Kit


def median(values) -> float:
    """The median of the values that are not NaN (an infinite gap counts); NaN if none."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(np.median(values)) if values.size else float("nan")


def done(ds: xr.Dataset, where: dict, mode: str, name: str) -> np.ndarray:
    """``name`` of the done cells of ``where`` in ``mode``, one value per seed (NaN: not
    done)."""
    cell = ds.sel({**where, "mode": mode})
    return cell[name].where(cell["done"]).values


def speedup(ds: xr.Dataset, where: dict, mode: str) -> str:
    found = finite_median(done(ds, where, mode, "speedup"))
    return f"{found:.2f}x" if np.isfinite(found) else "-"


def left_out(count: int) -> list[str]:
    if not count:
        return []
    return [
        "",
        f"{count} of the combinations of model, method and setting have no value and are left "
        "out: belief "
        "pruning (top-p states), which this mode does not do, a model without an exact "
        "reference, or cells not done.",
    ]


def table(
    ds: xr.Dataset,
    kit: Kit,
    mode: str,
    *,
    header: list[str],
    row: Callable[[xr.Dataset, dict], list[str] | None],
    empty: str,
) -> str:
    """Per model, method and setting: ``row(ds, where)`` (the columns of ``header``; None:
    no value, left out and counted) and the speedup of ``mode``."""
    rows, missing = [], 0
    for where in kit.cells(ds):
        found = row(ds, where)
        if found is None:
            missing += 1
            continue
        rows.append(
            [
                f"{where['family']}, n={where['n_states']}",
                kit.label(where["method"], where["setting"]),
                *found,
                speedup(ds, where, mode),
            ]
        )
    text = kit.markdown_table(["model", "method", *header, "speedup"], rows) if rows else empty
    return "\n".join([text, *left_out(missing)])


def per_model(ds: xr.Dataset, kit: Kit, axis, name: str, mode: str) -> None:
    """Each (method, setting)'s median over seeds of ``name`` against the model (x, a little
    apart per method and setting), with a bar from the least to the largest seed's value."""
    pairs, found = kit.models(ds), kit.styles(ds)
    offsets = np.linspace(-0.3, 0.3, len(found)) if len(found) > 1 else [0.0]
    for offset, ((method, setting), style) in zip(offsets, found.items(), strict=True):
        for x, (family, n) in enumerate(pairs):
            where = {"family": family, "n_states": n, "method": method, "setting": setting}
            if not bool(ds["in_grid"].sel(where)):
                continue
            values = done(ds, where, mode, name)
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


def per_model_figure(ds: xr.Dataset, kit: Kit, mode: str, names: list[str], title: str) -> Figure:
    """A figure of one panel per reading of ``names`` side by side, each ``per_model``, its
    legend the run's methods and settings."""
    from matplotlib.figure import Figure  # drawn only by a report: a reader of stores needs none

    size = (max(6.0, 1.0 * len(kit.models(ds)) + 2.5) * len(names), 5.2)
    figure = Figure(figsize=size, layout="constrained")
    axes = figure.subplots(1, len(names), squeeze=False)[0]
    figure.suptitle(title)
    for axis, name in zip(axes, names, strict=True):
        per_model(ds, kit, axis, name, mode)
    kit.legend(figure, ds, markers=True)
    return figure
