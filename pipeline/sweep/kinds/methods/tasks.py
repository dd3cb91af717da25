"""What the Dask workers run: models, gamma, exact references, approximations, cells.

Pure functions of their arguments (no I/O, no printing), so the plan can
recompute any of them on another worker. Arguments that describe work are
named, frozen specs passed by keyword. A cell returns a ``CellResult`` (two
arrays, cheap to send) whose ``values()`` maps result variable names
(``pipeline.results.methods.VARIABLES``) to values.
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numba
import numpy as np
from threadpoolctl import ThreadpoolController

from pipeline.inference import filtering
from pipeline.methods import Approximation, approximate
from pipeline.metrics import (
    doeblin_lower_bound,
    error_bounds,
    minimal_mixing_rate,
    mixing_rate_part,
    sparsity,
    step_errors,
    total_variation,
    tv_certificate,
)
from pipeline.models import HMM, build_model
from pipeline.operators import entries_at, step_work, stored_entries
from pipeline.sampling import sample

SAMPLING_STREAM = 0x5EED
"""Mixed into the seed of the observation sampler, apart from the model's own draws."""


@dataclass(frozen=True)
class ModelSpec:
    """One exact model of the grid: ``build_model(family, n_states, seed=seed, **params)``."""

    family: str
    n_states: int
    seed: int
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Timing:
    """How cells time their runs (``timing.*`` of the config)."""

    repeats: int
    min_seconds: float
    max_repeats: int
    threads: int
    enabled: bool = True
    """False: one approximate run for the accuracy, no timed runs (runtimes stored NaN)."""


class Model(NamedTuple):
    hmm: HMM
    build_time: float


class Mixing(NamedTuple):
    """gamma of a model's transitions, as the bounds use it."""

    gamma: float  # exact, or the Doeblin lower bound where ``exact`` is false
    doeblin: float  # the Doeblin lower bound sum_j min_i T[i, j]
    exact: bool
    seconds: float  # time gamma took, over every part of its pair search


class Reference(NamedTuple):
    """The exact run of one model in one mode (``beliefs`` None where it was not run)."""

    observations: np.ndarray  # (horizon + 1,), -1 where nothing is observed
    states: np.ndarray  # (horizon + 1,): the sampled state path (filter), or -1 (predict)
    beliefs: np.ndarray | None  # (horizon + 1, n_states)
    log_evidence: float


class Built(NamedTuple):
    """An approximation, what it cost to build, and what its transition matrix stores."""

    approximation: Approximation
    build_time: float
    sparsity: float  # fraction of zero entries of the transitions the approximate run uses
    stored_entries: int  # numbers stored for them


def build(spec: ModelSpec) -> Model:
    """The exact model of a grid point, timed."""
    start = time.perf_counter()
    hmm = build_model(spec.family, spec.n_states, seed=spec.seed, **spec.params)
    return Model(hmm, time.perf_counter() - start)


def observations(hmm: HMM, *, mode: str, horizon: int, observe_every: int, seed: int):
    """The state path and observation sequence of a mode, each shape (horizon + 1,).

    ``predict``: nothing observed (-1 everywhere, states too). ``filter``: a path
    sampled from the exact model with ``seed``, observed at steps
    ``t % observe_every == 0``.
    """
    if mode == "predict":
        return np.full(horizon + 1, -1), np.full(horizon + 1, -1)
    states, symbols = sample(hmm, horizon + 1, np.random.default_rng([seed, SAMPLING_STREAM]))
    symbols[np.arange(horizon + 1) % observe_every != 0] = -1
    return states, symbols


def reference(
    model: Model, *, mode: str, horizon: int, observe_every: int, seed: int, run: bool
) -> Reference:
    """The exact run every cell of this model and mode is measured against.

    With ``run`` false (an exact reference too big to compute) only the
    observations are drawn: the cells then measure the approximation alone and
    its error through the certificate.
    """
    states, observed = observations(
        model.hmm, mode=mode, horizon=horizon, observe_every=observe_every, seed=seed
    )
    if not run:
        return Reference(observed, states, None, np.nan)
    result = filtering(model.hmm, observed)
    return Reference(observed, states, result.beliefs, result.log_evidence)


def mixing_part(model: Model, *, part: int, parts: int) -> tuple[float, float]:
    """One of ``parts`` shares of gamma's pair search, and the seconds it took."""
    start = time.perf_counter()
    least = mixing_rate_part(model.hmm.transition, part, parts)
    return least, time.perf_counter() - start


def mixing(model: Model, *parts: tuple[float, float], exact: bool) -> Mixing:
    """gamma from the ``parts`` of its pair search (``mixing_part``), or on one thread here.

    Without ``exact``, gamma is the Doeblin lower bound, O(nnz + n) where the
    pair search costs O(n^2) pairs; the bounds built on it stay valid, only looser.
    """
    start = time.perf_counter()
    T = model.hmm.transition
    doeblin = doeblin_lower_bound(T)
    if not exact:
        gamma = doeblin
    elif parts:
        gamma = min(1.0, min(least for least, _ in parts))
    else:
        gamma = minimal_mixing_rate(T, threads=1)
    seconds = time.perf_counter() - start + sum(seconds for _, seconds in parts)
    return Mixing(gamma, doeblin, exact, seconds)


def build_approximation(model: Model, *, method: str, setting: float) -> Built:
    """The approximation of the model by ``method`` at ``setting``, timed."""
    start = time.perf_counter()
    approximation = approximate(model.hmm, method, setting)
    seconds = time.perf_counter() - start
    T = approximation.hmm.transition
    return Built(approximation, seconds, sparsity(T), stored_entries(T))


@functools.cache
def _threadpools() -> ThreadpoolController:
    """This process's thread pools, found once (finding them reads the loaded libraries)."""
    return ThreadpoolController()


def blas_threads() -> int:
    """Threads of the BLAS numpy uses in this process."""
    blas = _threadpools().select(user_api="blas").lib_controllers
    return max((pool.num_threads for pool in blas), default=1)


SERIES = (
    "tv",
    "bound",
    "bound_linear",
    "certificate",
    *(f"runtime_{run}{s}" for run in ("exact", "approx") for s in ("", "_min", "_max")),
)
"""The per-step results of a cell, in the row order of ``CellResult.series``."""
SCALARS = (
    "bound_mixing",
    "eps",
    "eps_start",
    "eps_mean",
    "speedup",
    "repeats",
    "work",
    "log_evidence",
    "log_evidence_error",
    "zero_evidence",
    "impossible_observations",
    "sparsity",
    "stored_entries",
    "build_time_approx",
    "build_time_model",
    "gamma",
    "gamma_time",
    "doeblin",
    "gamma_exact",
)
"""The single numbers of a cell, in the order of ``CellResult.scalars``."""


class CellResult(NamedTuple):
    """A cell's results in two arrays, cheap to send between processes."""

    series: np.ndarray  # (len(SERIES), horizon + 1)
    scalars: np.ndarray  # (len(SCALARS),)

    def values(self) -> dict[str, object]:
        """Result variable name -> value (an array over t, or a number)."""
        return {
            **dict(zip(SERIES, self.series, strict=True)),
            **dict(zip(SCALARS, self.scalars.tolist(), strict=True)),
        }


@contextlib.contextmanager
def _numba_threads(timing: Timing):
    """numba's threads (the parallel CSR step's) set to ``timing.threads`` (at most the
    cores numba has) in this thread while timing, restored after."""
    before = numba.get_num_threads()
    numba.set_num_threads(min(timing.threads, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _timed_runs(model: Model, approximation: Approximation, exact: Reference, timing: Timing):
    """Exact and approximate runs alternating (exact first on even repeats), BLAS and numba's
    parallel steps fixed to ``timing.threads``, until ``timing.repeats`` pairs and
    ``timing.min_seconds`` (at most ``timing.max_repeats``). Returns the exact runs (none
    without a reference) and the approximate runs; with timing off, no exact run and the
    one approximate run the accuracy needs."""
    if not timing.enabled:
        hmm, prune = approximation.hmm, approximation.prune
        return [], [filtering(hmm, exact.observations, prune=prune)]
    runs: dict[str, list] = {"exact": [], "approx": []}
    pair = ("exact", "approx") if exact.beliefs is not None else ("approx",)
    start = time.perf_counter()
    with _threadpools().limit(limits=timing.threads, user_api="blas"), _numba_threads(timing):
        while len(runs["approx"]) < timing.repeats or (
            time.perf_counter() - start < timing.min_seconds
            and len(runs["approx"]) < timing.max_repeats
        ):
            for which in pair if len(runs["approx"]) % 2 == 0 else pair[::-1]:
                if which == "exact":
                    runs[which].append(filtering(model.hmm, exact.observations))
                else:
                    hmm, prune = approximation.hmm, approximation.prune
                    runs[which].append(filtering(hmm, exact.observations, prune=prune))
    return runs["exact"], runs["approx"]


def _impossible(hmm: HMM, exact: Reference) -> float:
    """The fraction of observations that ``hmm`` makes impossible for the state that
    emitted them: the approximate emission row of the sampled state gives the
    observed symbol probability 0, so the filter conditions away the truth. NaN
    when nothing is observed (prediction)."""
    observed = exact.observations >= 0
    if not observed.any():
        return np.nan
    kept = entries_at(hmm.emission, exact.states[observed], exact.observations[observed])
    return float(np.mean(kept == 0))


def run_cell(
    model: Model,
    built: Built,
    exact: Reference,
    mixed: Mixing,
    *,
    mode: str,
    timing: Timing,
) -> CellResult:
    """Time exact and approximate inference side by side; measure the error and the cost.

    The speedup is a ratio of runs made moments apart: the median over
    repeats of the per-repeat ratio of total runtimes. Runtimes are cumulative
    per step (median, min and max over repeats). Without an exact run
    (``exact.beliefs`` None) only the approximation is timed and TV, speedup
    and evidence error are NaN: the certificate is then the measure of the
    error. Bounds are for prediction; the certificate is NaN when filtering.
    """
    approximation = built.approximation
    exact_runs, approx_runs = _timed_runs(model, approximation, exact, timing)
    steps = exact.observations.size
    untimed = np.full((1, steps), np.nan)
    approx_time = np.array([r.elapsed for r in approx_runs]) if timing.enabled else untimed
    exact_time = np.array([r.elapsed for r in exact_runs]) if exact_runs else untimed
    run = approx_runs[0]
    eps, start = approximation.step_error, approximation.start_error
    bounds = error_bounds(min(eps, 1.0), mixed.gamma, np.arange(steps), start=min(start, 1.0))
    measured = exact.beliefs if exact.beliefs is not None else np.nan
    filtered = mode == "filter"
    errors = step_errors(
        approximation.prior_error, approximation.row_error, run.beliefs, run.pruned
    )
    certificate = tv_certificate(mixed.gamma, errors)
    T = approximation.hmm.transition
    work = [step_work(T, run.beliefs[t - 1] != 0) for t in range(1, steps)]
    series = [
        total_variation(measured, run.beliefs),
        bounds["recursive"],
        bounds["linear"],
        np.full(steps, np.nan) if filtered else certificate,
        *(
            statistic(times, axis=0)
            for times in (exact_time, approx_time)
            for statistic in (np.median, np.min, np.max)
        ),
    ]
    scalars = [
        bounds["mixing"][0],
        eps,
        start,
        float(approximation.row_error.mean()) + approximation.prune_error,
        np.median(exact_time[:, -1] / approx_time[:, -1]),
        len(approx_runs) if timing.enabled else 0,
        np.mean(work) if work else np.nan,
        exact.log_evidence if filtered else np.nan,
        run.log_evidence - exact.log_evidence if filtered else np.nan,
        run.zero_evidence.size,
        _impossible(approximation.hmm, exact),
        built.sparsity,
        built.stored_entries,
        built.build_time,
        model.build_time,
        mixed.gamma,
        mixed.seconds,
        mixed.doeblin,
        float(mixed.exact),
    ]
    return CellResult(np.array(series), np.array(scalars, dtype=np.float64))
