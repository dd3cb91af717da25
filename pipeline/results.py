"""Small readings of a results Dataset shared by the summary, the figures and the paper check."""

from __future__ import annotations

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
