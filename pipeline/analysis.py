"""Looking at a results Dataset: the summary table printed after a sweep."""

from __future__ import annotations

import numpy as np
import xarray as xr


def _median(array: xr.DataArray) -> float:
    values = np.asarray(array, dtype=float)
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else float("nan")


def summary_table(ds: xr.Dataset) -> str:
    """Per family, size and p: the speedup per mode, and TV and its bound at the last step.

    Speedup is exact dense over top-p sparse runtime; TV and the recursive
    bound are for prediction; each is the median over seeds of done cells.
    """
    last = ds.isel(t=-1).load()
    modes = [str(m) for m in ds["mode"].values]
    header = [
        "family",
        "n_states",
        "p",
        *(f"speedup {m}" for m in modes),
        "tv predict",
        "bound",
        "sparsity",
        "done",
    ]
    rows = []
    for family in ds["family"].values:
        for n in ds["n_states"].values:
            if "in_grid" in ds and not bool(ds["in_grid"].sel(family=family, n_states=n)):
                continue
            for p in ds["p"].values:
                cell = last.sel(family=family, n_states=n, p=p)
                done = cell["done"]
                speedups = [
                    _median(cell["speedup"].sel(mode=m).where(done.sel(mode=m))) for m in modes
                ]
                tv = (
                    _median(cell["tv"].sel(mode="predict").where(done.sel(mode="predict")))
                    if "predict" in modes
                    else float("nan")
                )
                rows.append(
                    [
                        str(family),
                        str(int(n)),
                        f"{p:g}",
                        *(f"{s:.2f}x" for s in speedups),
                        f"{tv:.4f}",
                        f"{_median(cell['bound']):.4f}",
                        f"{_median(cell['sparsity']):.4f}",
                        f"{int(done.sum())}/{done.size}",
                    ]
                )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)
