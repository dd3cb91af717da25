"""The report of a ``ring_mixing`` store: TV against t per cell, its bound dashed."""

from pathlib import Path

import xarray as xr
from matplotlib.figure import Figure

from pipeline.analysis.base import Analysis, save
from ringhmm.mixing.results import bound, summary


def analyze(ds: xr.Dataset, store: Path, out: Path) -> Analysis:
    figure = Figure(figsize=(6, 4), layout="constrained")
    axis = figure.subplots()
    for k, (n, r) in enumerate((n, r) for n in ds.n_states.values for r in ds.reach.values):
        cell = ds.sel(n_states=n, reach=r)
        axis.plot(ds.t, cell.tv, color=f"C{k}", marker="o", ms=3, label=f"n={n}, reach={r}")
        axis.plot(ds.t, bound(cell), "--", color=f"C{k}")
    axis.set(yscale="log", xlabel="step t", ylabel="TV (dashed: (1 - gamma)^t)")
    axis.legend(fontsize="small")
    text = f"# Ring mixing: {store}\n\n```text\n{summary(ds)}\n```\n\n![tv](tv.png)\n"
    return save(out, {"tv.png": figure}, text)
