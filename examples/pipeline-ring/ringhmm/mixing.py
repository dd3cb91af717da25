"""``ring_mixing``: a sweep kind of its own, how fast the ring walk forgets where it started.

A cell is one ``(n_states, reach)``: the ring family's transition matrix, its minimal mixing
rate gamma, and the TV between the walks started at state 0 and at state n/2 after t steps,
which the contraction of Boyen and Koller bounds by ``(1 - gamma)^t``. This module is what a
reader of its stores needs (no Dask, no Hydra); the sweep is ``ringhmm.mixing_sweep``, the
report ``ringhmm.mixing_report``.
"""

import xarray as xr

from pipeline.kinds.base import Kind, Schema, Variable, status_variables, text_table

DIMS = ("n_states", "reach")
SCHEMA = Schema(
    name="ring_mixing",
    dims=DIMS,
    variables={
        "tv": Variable((*DIMS, "t"), "1", "TV between the walks from state 0 and state n/2"),
        "gamma": Variable(DIMS, "1", "minimal mixing rate gamma of the transition matrix"),
        **status_variables(DIMS),
    },
    coordinates={"n_states": "states n", "reach": "states a row steps forward to", "t": "step"},
)

KIND = Kind(SCHEMA, sweep="ringhmm.mixing_sweep", report="ringhmm.mixing_report:analyze")
"""What the entry point ``pipeline.kinds: ring_mixing`` names."""


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
