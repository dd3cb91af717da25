"""Small readings of a results Dataset shared by the summary, the figures and the paper check."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import xarray as xr


def models(ds: xr.Dataset) -> list[tuple[str, int]]:
    """The ``(family, n_states)`` pairs the run has, in coordinate order."""
    pairs = []
    for family in ds["family"].values:
        for n in ds["n_states"].values:
            if "in_grid" not in ds or bool(ds["in_grid"].sel(family=family, n_states=n)):
                pairs.append((str(family), int(n)))
    return pairs


def finite_median(array) -> float:
    """The median of the finite values (NaN marks cells not done); NaN if there are none."""
    values = np.asarray(array, dtype=float)
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else float("nan")


class Payoff(NamedTuple):
    """When top-p pays in one mode of a run: speedup against the fraction of transitions kept.

    ``kept`` (k,) and ``speedup`` (k,) are the done cells' ``1 - sparsity`` and
    ``speedup``; ``exponent`` and ``scale`` fit ``speedup = scale * kept**exponent``
    by least squares on the logarithms; ``break_even`` is the kept fraction where
    that fit crosses 1, NaN where it crosses outside the kept fractions of the cells
    (no extrapolation) or the cells do not determine a fit.
    """

    kept: np.ndarray
    speedup: np.ndarray
    exponent: float
    scale: float
    break_even: float


def payoff(ds: xr.Dataset, mode: str) -> Payoff:
    """The speedup of every done cell of ``mode`` against its kept fraction, and the fit."""
    speedup = ds["speedup"].sel(mode=mode).where(ds["done"].sel(mode=mode))
    kept = (1 - ds["sparsity"]).broadcast_like(speedup)
    valid = np.isfinite(speedup.values) & np.isfinite(kept.values) & (speedup.values > 0)
    kept, speedup = kept.values[valid], speedup.values[valid]
    exponent = scale = break_even = float("nan")
    if np.unique(kept).size >= 2:
        exponent, log_scale = np.polyfit(np.log(kept), np.log(speedup), 1)
        scale = float(np.exp(log_scale))
        crossing = np.exp(-log_scale / exponent) if exponent != 0 else np.inf
        if kept.min() <= crossing <= kept.max():
            break_even = float(crossing)
    return Payoff(kept, speedup, float(exponent), scale, break_even)
