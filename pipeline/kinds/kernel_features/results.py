"""The store of the kernel-features sweep: how many random features a softmax needs as the
number of states grows (Section 6 of Chiu, Deng and Rush, *Scaling Hidden Markov Language
Models*; ``pipeline.hmmlm.feature_maps``).

A cell is one ``(n_states, temperature, feature_map)``: Gaussian embeddings of n states
whose logits have standard deviation 1 / temperature, and one random feature map of the
largest feature count, whose first F features give the kernel of each F (the
``n_features`` axis). ``summary`` is the table a sweep prints at its end: the smallest F
whose median row TV is at most the threshold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import xarray as xr

from pipeline.results.schema import Record, Schema, Variable, status_variables, text_table

DIMS = ("n_states", "temperature", "feature_map")
"""The dimensions of a cell."""
CELL = (*DIMS, "n_features")

VARIABLES: dict[str, Variable] = {
    "row_tv": Variable(
        CELL,
        "1",
        "median over the sampled rows of TV(softmax row, kernel row normalised by its sum); "
        "inf where most kernel rows sum to zero or less",
    ),
    "row_tv_p90": Variable(CELL, "1", "90th percentile over the sampled rows of the same TV"),
    "negative_entries": Variable(
        CELL, "1", "fraction of the kernel rows' entries that are negative (0 for positive)"
    ),
    "rows": Variable(DIMS, "1", "rows sampled (all rows up to that many states)"),
    "seconds": Variable(
        DIMS, "s", "wall-clock seconds of the cell (every feature count)", timed=True
    ),
    **status_variables(DIMS),
}


@dataclass(frozen=True)
class FeaturesRecord(Record):
    """What one cell computes (``tasks.features_cell``), a field per variable of
    ``VARIABLES`` (whose meaning it has); F feature counts."""

    row_tv: np.ndarray  # (F,)
    row_tv_p90: np.ndarray  # (F,)
    negative_entries: np.ndarray  # (F,)
    rows: int
    seconds: float


SCHEMA = Schema(
    name="kernel_features",
    dims=DIMS,
    variables=VARIABLES,
    record=FeaturesRecord,
    coordinates={
        "n_states": "number of states n (columns of a softmax row)",
        "temperature": "temperature: the logits u.v have standard deviation 1 / temperature",
        "feature_map": "random feature map: positive exp(Wu - |u|^2/2), or fourier",
        "n_features": "random features F",
    },
)


def features_needed(ds: xr.Dataset, threshold: float) -> xr.DataArray:
    """Per cell: the smallest F whose median row TV is at most ``threshold`` (NaN: none)."""
    reached = (ds["row_tv"] <= threshold) & ds["done"]
    counts = xr.DataArray(ds["n_features"].values, dims="n_features").astype(float)
    needed = counts.where(reached).min("n_features")
    return needed.where(ds["done"])


def threshold_of(ds: xr.Dataset) -> float:
    """The TV threshold the sweep was configured with."""
    return float(json.loads(ds.attrs.get("grid", "{}")).get("threshold", 0.05))


def summary(ds: xr.Dataset) -> str:
    """The smallest F reaching the threshold, per temperature and feature map (rows) and
    state count (columns); '>' where the largest F does not."""
    ds = ds.load()
    threshold = threshold_of(ds)
    needed = features_needed(ds, threshold)
    top = int(ds["n_features"].max())
    rows = []
    for temperature in ds["temperature"].values:
        for name in ds["feature_map"].values:
            cells = needed.sel(temperature=temperature, feature_map=name)
            done = ds["done"].sel(temperature=temperature, feature_map=name)
            rows.append(
                [f"{temperature:g}", str(name)]
                + [
                    "-" if not bool(d) else (f">{top}" if np.isnan(v) else str(int(v)))
                    for v, d in zip(cells.values, done.values, strict=True)
                ]
            )
    header = ["temperature", "feature_map", *(str(int(n)) for n in ds["n_states"].values)]
    return f"F for a median row TV <= {threshold:g}, by n_states:\n" + text_table(header, rows)
