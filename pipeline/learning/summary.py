"""The learning report's numbers, as pure functions of the sweep's ``xarray.Dataset``.

The Dataset holds ``compare``'s records (``pipeline.learning.compare``) over these dims:

- ``REFERENCE`` = ``(family, n_states, seed, sequences, length)``: one problem (generating
  model and its seed, training sequences and their length) and its exact-EM reference;
- ``CELL`` = ``REFERENCE + (method, setting)``: one approximate E-step on it, the settings
  the union of every method's (a method's cell at another's setting is all NaN);
- ``iteration``: the EM iteration, labelled 1..K.

and these variables, in nats per observed step and seconds (NaN after a run's last
iteration):

- ``held_out``, ``e_step_seconds``, ``m_step_seconds`` over ``CELL + (iteration,)``: the
  approximations' (``Comparison.held_out`` ...);
- ``held_out_exact``, ``e_step_seconds_exact``, ``m_step_seconds_exact`` over ``REFERENCE +
  (iteration,)``: exact EM's.

A run's wall time to iteration ``k`` (``elapsed``) is the sum of its E- and M-steps up to
``k``: what EM costs, without the held-out scoring the sweep adds. Over seeds the functions
take medians. This module imports xarray; ``pipeline.learning`` does not import it.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

REFERENCE = ("family", "n_states", "seed", "sequences", "length")
"""The dims of one problem and its exact-EM reference."""
CELL = (*REFERENCE, "method", "setting")
"""The dims of one approximate run."""
PROBLEM = ("family", "n_states", "sequences", "length")
"""The dims the answers are given over: a problem's, its seeds reduced."""

TOLERANCE = 0.01
"""How far below exact EM's held-out log-likelihood, as a fraction of its magnitude, a run
still counts as matching it (1%)."""


def elapsed(ds: xr.Dataset, suffix: str = "") -> xr.DataArray:
    """Seconds of E- and M-steps up to and including each iteration, of the approximations
    (``suffix=""``, over ``CELL + (iteration,)``) or of exact EM (``"_exact"``)."""
    step = ds[f"e_step_seconds{suffix}"] + ds[f"m_step_seconds{suffix}"]
    return step.cumsum("iteration", skipna=False)


def _band(ds: xr.Dataset, tolerance: float) -> xr.DataArray:
    """The least held-out log-likelihood within ``tolerance`` of exact EM's best one, over
    ``REFERENCE``."""
    best = ds["held_out_exact"].max("iteration")
    return best - tolerance * abs(best)


def _first_time(seconds: xr.DataArray, reached: xr.DataArray) -> xr.DataArray:
    """``seconds`` at the first iteration where ``reached`` holds; NaN where it never does."""
    return seconds.where(reached).min("iteration")


def _forward_filled(values: xr.DataArray) -> xr.DataArray:
    """``values`` with each NaN after a run's last iteration replaced by that iteration's
    value (a run that stopped keeps its model), along ``iteration``."""

    def fill(array: np.ndarray) -> np.ndarray:
        present = ~np.isnan(array)
        index = np.where(present, np.arange(array.shape[-1]), 0)
        index = np.maximum.accumulate(index, axis=-1)
        filled = np.take_along_axis(array, index, axis=-1)
        return np.where(np.maximum.accumulate(present, axis=-1), filled, np.nan)

    return xr.apply_ufunc(
        fill, values, input_core_dims=[["iteration"]], output_core_dims=[["iteration"]]
    ).transpose(*values.dims)


def fastest_within(ds: xr.Dataset, tolerance: float = TOLERANCE) -> xr.Dataset:
    """For each problem, the approximation that reaches within ``tolerance`` of exact EM's
    best held-out log-likelihood in the least wall time, and the time it saves.

    The target is exact EM's best held-out log-likelihood over its iterations: its final one
    where held-out likelihood rises to the end, an earlier one where EM overfits the training
    sequences (as it does with few steps a state), which is where a user holding out data
    stops. A run reaches the band at the first iteration whose held-out log-likelihood is at
    least that less ``tolerance`` times its magnitude, after ``elapsed`` seconds; exact EM
    reaches it the same way. An approximation counts only where it reaches the band in every
    seed; its time and exact EM's are their medians over seeds.

    Returns
    -------
    xr.Dataset over ``PROBLEM``:
        ``method`` (str, "" where none reaches the band), ``setting``, ``seconds`` (its time
        to the band), ``exact_seconds`` (exact EM's), ``saved_seconds`` (``exact_seconds -
        seconds``) and ``saved_fraction`` (of ``exact_seconds``); NaN where none reaches it.
    """
    band = _band(ds, tolerance)
    seconds = _first_time(elapsed(ds), ds["held_out"] >= band)
    exact = _first_time(elapsed(ds, "_exact"), ds["held_out_exact"] >= band).median("seed")
    typical = seconds.median("seed").where(seconds.notnull().all("seed"))
    stacked = typical.stack(run=("method", "setting")).transpose(*PROBLEM, "run")
    values = stacked.values
    reached = ~np.isnan(values).all(axis=-1)
    best = np.argmin(np.where(np.isnan(values), np.inf, values), axis=-1)
    coords = {dim: stacked[dim].values for dim in PROBLEM}
    fastest = xr.DataArray(
        np.where(reached, np.take_along_axis(values, best[..., None], -1)[..., 0], np.nan),
        coords=coords,
        dims=PROBLEM,
    )
    exact = exact.transpose(*PROBLEM)
    runs = stacked["run"].values
    return xr.Dataset(
        {
            "method": (PROBLEM, _pick(runs, best, reached, 0, "")),
            "setting": (PROBLEM, _pick(runs, best, reached, 1, np.nan)),
            "seconds": fastest,
            "exact_seconds": exact,
            "saved_seconds": exact - fastest,
            "saved_fraction": (exact - fastest) / exact,
        },
        coords=coords,
    )


def _pick(runs: np.ndarray, best: np.ndarray, reached: np.ndarray, field: int, none):
    """Field ``field`` of ``runs[best]`` ((method, setting) pairs), ``none`` where not
    ``reached``."""
    picked = np.array([run[field] for run in runs])[best]
    return np.where(reached, picked, none)


def _front(seconds: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each point along the last axis is on the Pareto front: no other point takes
    at most its ``seconds`` with at least its ``values``, and less time or more value. NaN
    points are never on it and dominate nothing."""
    valid = ~(np.isnan(seconds) | np.isnan(values))
    s, v = np.where(valid, seconds, np.inf), np.where(valid, values, -np.inf)
    no_worse = (s[..., None, :] <= s[..., :, None]) & (v[..., None, :] >= v[..., :, None])
    better = (s[..., None, :] < s[..., :, None]) | (v[..., None, :] > v[..., :, None])
    dominated = (no_worse & better & valid[..., None, :]).any(axis=-1)
    return valid & ~dominated


def pareto(ds: xr.Dataset) -> xr.Dataset:
    """Held-out log-likelihood against wall time for learning: per problem and method, the
    Pareto front over its settings and iterations.

    Every (setting, iteration) of a method is a point: its ``elapsed`` seconds and its
    held-out log-likelihood, each the median over seeds. A point is on the method's front
    when no other point of the method is as fast and as good, and faster or better.

    Returns
    -------
    xr.Dataset:
        ``elapsed``, ``held_out`` and ``on_front`` (bool) over ``PROBLEM + (method, setting,
        iteration)``; and exact EM's curve, ``elapsed_exact`` and ``held_out_exact`` over
        ``PROBLEM + (iteration,)``, for the figure to draw beside the fronts.
    """
    seconds = elapsed(ds).median("seed")
    held_out = ds["held_out"].median("seed")
    dims = (*PROBLEM, "method", "setting", "iteration")
    seconds, held_out = seconds.transpose(*dims), held_out.transpose(*dims)
    points = (*seconds.shape[:-2], -1)  # a method's settings and iterations, flattened
    mask = _front(seconds.values.reshape(points), held_out.values.reshape(points))
    return xr.Dataset(
        {
            "elapsed": seconds,
            "held_out": held_out,
            "on_front": (dims, mask.reshape(seconds.shape)),
            "elapsed_exact": elapsed(ds, "_exact").median("seed").transpose(*PROBLEM, "iteration"),
            "held_out_exact": ds["held_out_exact"].median("seed").transpose(*PROBLEM, "iteration"),
        }
    )


def divergence(ds: xr.Dataset, tolerance: float = TOLERANCE) -> xr.DataArray:
    """Where an approximate E-step leads EM away from exact EM: the first iteration whose
    held-out log-likelihood is below exact EM's at the same iteration by more than
    ``tolerance`` of its magnitude, over ``CELL``.

    A run that stopped keeps its last model, so its last held-out value stands for the
    iterations after it (either run's). ``inf`` where it never falls below; NaN where the
    cell holds no run.
    """
    mine = _forward_filled(ds["held_out"])
    exact = _forward_filled(ds["held_out_exact"])
    below = mine < exact - tolerance * abs(exact)
    iteration = ds["iteration"].astype(float).broadcast_like(below)
    first = iteration.where(below).min("iteration")
    ran = ds["held_out"].notnull().any("iteration")
    return first.fillna(np.inf).where(ran).transpose(*CELL)
