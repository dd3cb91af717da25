"""Readings of a methods store shared by its report's figures, tables and paper check."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import xarray as xr

from pipeline.kinds.methods.modes import Mode, lookup
from pipeline.kinds.methods.results import variants
from pipeline.results.schema import finite_median

METHOD_TITLES = {
    "topp": "top-p",
    "topk": "top-k",
    "topp_states": "top-p states",
    "topp_transitions": "top-p transitions",
    "topk_transitions": "top-k transitions",
    "lowrank": "low-rank",
    "banded_lowrank": "banded low-rank",
}


def modes_of(ds: xr.Dataset, wanted: Callable[[Mode], bool] = lambda mode: True) -> list[Mode]:
    """The modes of the run (``modes.lookup``) for which ``wanted`` holds, in the run's order:
    ``stepped`` those whose runs are clocked step by step and whose TV at the last step is
    the error the run carries (the runtime figure and the fronts read these); ``"tv" in
    mode.produces`` those that store TV at every step."""
    found = [lookup(str(name)) for name in ds["mode"].values]
    return [mode for mode in found if wanted(mode)]


def stepped(mode: Mode) -> bool:
    return mode.stepped


def stores_tv(mode: Mode) -> bool:
    return "tv" in mode.produces


def mode_title(mode: str) -> str:
    """How the report names ``mode``: "filtering"."""
    return lookup(mode).title


def label(method: str, setting: float) -> str:
    """A method and its setting for legends and tables, e.g. ``top-p 0.9``, ``top-k 5``."""
    return f"{METHOD_TITLES.get(method, method)} {setting:g}"


class Payoff(NamedTuple):
    """When top-p pays in one mode of a run: speedup against the fraction of transitions kept.

    ``kept`` (k,) and ``speedup`` (k,) are the done top-p cells' ``1 - sparsity``
    and ``speedup``; ``exponent`` and ``scale`` fit ``speedup = scale * kept**exponent``
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
    """The speedup of every done top-p cell of ``mode`` against its kept fraction, and the fit."""
    empty = np.empty(0)
    if "topp" not in ds["method"].values:
        return Payoff(empty, empty, float("nan"), float("nan"), float("nan"))
    top = ds.sel({"method": "topp", "mode": mode})
    speedup = top["speedup"].where(top["done"])
    kept = (1 - top["sparsity"]).broadcast_like(speedup)
    valid = np.isfinite(speedup.values) & np.isfinite(kept.values) & (speedup.values > 0)
    kept, speedup = kept.values[valid], speedup.values[valid]
    exponent = scale = break_even = float("nan")
    if np.unique(kept).size >= 2:
        exponent, log_scale = np.polyfit(np.log(kept), np.log(speedup), 1)
        scale = float(np.exp(log_scale))
        # where the fit crosses 1x, compared on logarithms: a flat fit's crossing overflows
        log_crossing = -log_scale / exponent if exponent != 0 else np.inf
        if np.log(kept.min()) <= log_crossing <= np.log(kept.max()):
            break_even = float(np.exp(log_crossing))
    return Payoff(kept, speedup, float(exponent), scale, break_even)


class Point(NamedTuple):
    """One way to run a model in a mode: its cost and its error, medians over seeds."""

    method: str  # a method, or "exact"
    setting: float  # NaN for exact
    runtime: float  # seconds per step
    tv: float  # TV at the last step (0 for exact)
    stored: float = float("nan")  # numbers the approximate transition matrix stores (NaN: exact)


EXACT_TRANSITIONS = frozenset({"topp_states"})
"""Methods that run on the exact transition matrix (belief pruning): they store the exact
model, so the fronts over stored size leave them out as they leave out exact inference."""

COSTS = {"runtime": "runtime per step", "stored": "stored transition entries"}
"""What a Pareto front can trade accuracy against: ``Point`` fields and their titles."""


def points(ds: xr.Dataset, family: str, n_states: int, mode: str) -> list[Point]:
    """Exact inference and every done (method, setting) of one model and mode.

    Each point's runtime per step is the median over seeds of the cumulative
    runtime at the last step divided by the horizon; exact's runtime pools
    every cell that timed it.
    """
    cell = ds.sel(family=family, n_states=n_states, mode=mode)
    steps = int(ds["t"].values[-1])
    done = cell["done"]
    found = []
    exact = finite_median(cell["runtime_exact"].isel(t=-1).where(done)) / steps
    if np.isfinite(exact):
        found.append(Point("exact", float("nan"), exact, 0.0))
    for method, setting in variants(ds):
        one = cell.sel({"method": method, "setting": setting})
        ok = one["done"]
        runtime = finite_median(one["runtime_approx"].isel(t=-1).where(ok)) / steps
        tv = finite_median(one["tv"].isel(t=-1).where(ok))
        stored = (
            float("nan")
            if method in EXACT_TRANSITIONS
            else finite_median(one["stored_entries"].where(ok))
        )
        if np.isfinite(runtime) and np.isfinite(tv):
            found.append(Point(method, setting, runtime, tv, stored))
    return found


FRONT_GAIN = 0.01
"""A slower point joins the Pareto front only if it lowers the TV of every faster point by
more than this fraction: a 0.0360 against a 0.0359 is no reason to run 5x longer."""


def pareto(candidates: list[Point], cost: str = "runtime") -> list[Point]:
    """The points no other point beats in both ``cost`` (a field of ``COSTS``) and TV, by
    increasing cost.

    Each point on the front is the most accurate at its cost: every cheaper
    point has a TV larger by more than ``FRONT_GAIN`` (exact inference, TV 0,
    always joins where its cost is known). Points of unknown cost are left out.
    """
    known = [p for p in candidates if np.isfinite(getattr(p, cost))]
    front: list[Point] = []
    for point in sorted(known, key=lambda p: (getattr(p, cost), p.tv)):
        if not front or point.tv < front[-1].tv * (1 - FRONT_GAIN):
            front.append(point)
    return front
