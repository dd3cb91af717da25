"""What a ``ring_mixing`` store holds, and the table its sweep prints: what a reader of its
stores needs (no Dask, no Hydra)."""

from dataclasses import dataclass

import numpy as np
import xarray as xr

from pipeline.results.schema import Record, Schema, Variable, status_variables, text_table

DIMS = ("n_states", "reach")


@dataclass(frozen=True)
class MixingRecord(Record):
    """What one cell computes (``sweep.mixing_cell``)."""

    tv: np.ndarray  # (horizon + 1,)
    gamma: float


SCHEMA = Schema(
    name="ring_mixing",
    dims=DIMS,
    variables={
        "tv": Variable((*DIMS, "t"), "1", "TV between the walks from state 0 and state n/2"),
        "gamma": Variable(DIMS, "1", "minimal mixing rate gamma of the transition matrix"),
        **status_variables(DIMS),
    },
    record=MixingRecord,
    coordinates={"n_states": "states n", "reach": "states a row steps forward to", "t": "step"},
)


def bound(ds: xr.Dataset) -> xr.DataArray:
    """``(1 - gamma)^t``: what ``tv`` may not exceed."""
    return (1 - ds["gamma"]) ** ds["t"]


def summary(ds: xr.Dataset) -> str:
    """gamma, and the TV after the last step beside its bound, per cell."""
    ds = ds.load()
    last = ds.isel(t=-1)
    rows = [
        [str(int(n)), str(int(r)), f"{float(cell.gamma):.3g}", f"{float(cell.tv):.3g}",
         f"{float(bound(cell)):.3g}"]
        for n in ds["n_states"].values
        for r in ds["reach"].values
        if bool((cell := last.sel(n_states=n, reach=r))["done"])
    ]  # fmt: skip
    header = ["n", "reach", "gamma", f"tv at t={int(last.t)}", "(1-gamma)^t"]
    return text_table(header, rows)
