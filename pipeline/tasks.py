"""What the Dask workers run: models, exact references, gamma, top-p models, cells.

Pure functions of their arguments (no I/O, no printing), so the task graph
can recompute any of them on another worker. A cell returns a ``CellResult``
(two arrays, cheap to send) whose ``values()`` maps result variable names
(``pipeline.store.VARIABLES``) to values.
"""

from __future__ import annotations

import functools
import time
from typing import NamedTuple

import numpy as np
from threadpoolctl import ThreadpoolController

from pipeline.inference import filtering
from pipeline.metrics import (
    doeblin_lower_bound,
    minimal_mixing_rate,
    mixing_rate_part,
    sparsity,
    total_variation,
    tv_bounds,
    tv_certificate,
)
from pipeline.models import HMM, build_model
from pipeline.sampling import sample
from pipeline.topp import kept_mass, topp_hmm

SAMPLING_STREAM = 0x5EED
"""Mixed into the seed of the observation sampler, apart from the model's own draws."""


class Model(NamedTuple):
    hmm: HMM
    build_time: float


class Reference(NamedTuple):
    """The exact run of one model in one mode (``beliefs`` None where it was not run)."""

    observations: np.ndarray  # (horizon + 1,), -1 where nothing is observed
    beliefs: np.ndarray | None  # (horizon + 1, n_states)
    log_evidence: float


class Approximation(NamedTuple):
    hmm: HMM
    build_time: float
    sparsity: float
    nnz: int
    prior_kept: float  # mass of the exact prior the top-p prior keeps
    row_kept: np.ndarray  # (n_states,): mass of each exact transition row kept


def build(family: str, n_states: int, seed: int, params: dict) -> Model:
    """The exact model of a grid point, timed."""
    start = time.perf_counter()
    hmm = build_model(family, n_states, seed=seed, **params)
    return Model(hmm, time.perf_counter() - start)


def observations(hmm: HMM, mode: str, horizon: int, observe_every: int, seed: int) -> np.ndarray:
    """The observation sequence of a mode, shape (horizon + 1,).

    ``predict``: nothing observed (-1 everywhere). ``filter``: a path sampled
    from the exact model with ``seed``, observed at steps ``t % observe_every == 0``.
    """
    if mode == "predict":
        return np.full(horizon + 1, -1)
    _, symbols = sample(hmm, horizon + 1, np.random.default_rng([seed, SAMPLING_STREAM]))
    symbols[np.arange(horizon + 1) % observe_every != 0] = -1
    return symbols


def reference(
    model: Model, mode: str, horizon: int, observe_every: int, seed: int, run: bool = True
) -> Reference:
    """The exact run every cell of this model and mode is measured against.

    With ``run`` false (an exact reference too big to compute) only the
    observations are drawn: the cells then measure top-p alone and its error
    through the certificate.
    """
    observed = observations(model.hmm, mode, horizon, observe_every, seed)
    if not run:
        return Reference(observed, None, np.nan)
    result = filtering(model.hmm, observed)
    return Reference(observed, result.beliefs, result.log_evidence)


def mixing_part(model: Model, part: int, parts: int) -> tuple[float, float]:
    """One of ``parts`` shares of gamma's pair search, and the seconds it took."""
    start = time.perf_counter()
    least = mixing_rate_part(model.hmm.transition, part, parts)
    return least, time.perf_counter() - start


def mixing(model: Model, exact: bool, *parts: tuple[float, float]) -> dict[str, float]:
    """gamma, its Doeblin lower bound, whether gamma is exact, and the time gamma took.

    ``exact``: the least of the ``parts`` (``mixing_part`` results), or the whole
    pair search here on one thread when there are none. Otherwise gamma is the
    Doeblin lower bound, O(nnz + n) where the pair search costs O(n^2) pairs;
    the bounds built on it stay valid, only looser.
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
    return {
        "gamma": gamma,
        "gamma_time": time.perf_counter() - start + sum(seconds for _, seconds in parts),
        "doeblin": doeblin,
        "gamma_exact": float(exact),
    }


def approximate(model: Model, p: float) -> Approximation:
    """The top-p model, timed, with its sparsity and the mass it keeps of each row."""
    start = time.perf_counter()
    hmm = topp_hmm(model.hmm, p)
    elapsed = time.perf_counter() - start
    return Approximation(
        hmm,
        elapsed,
        sparsity(hmm.transition),
        int(hmm.transition.nnz),
        float(model.hmm.prior[hmm.prior > 0].sum()),
        kept_mass(model.hmm.transition, hmm.transition),
    )


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
    "certificate",
    *(f"runtime_{b}{s}" for b in ("dense", "sparse") for s in ("", "_min", "_max")),
)
"""The per-step results of a cell, in the row order of ``CellResult.series``."""
SCALARS = (
    "bound_mixing",
    "speedup",
    "repeats",
    "log_evidence",
    "log_evidence_error",
    "zero_evidence",
    "sparsity",
    "nnz",
    "build_time_topp",
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


def run_cell(
    model: Model,
    approximation: Approximation,
    exact: Reference,
    mixed: dict[str, float],
    p: float,
    mode: str,
    *,
    repeats: int,
    min_seconds: float,
    max_repeats: int,
    threads: int,
) -> CellResult:
    """Time exact and top-p inference side by side; measure the error.

    The two runs alternate (dense first on even repeats, sparse first on odd
    ones) with BLAS fixed to ``threads``, so the speedup is a ratio of runs
    made moments apart: the median over repeats of the per-repeat ratio of
    total runtimes. Pairs repeat at least ``repeats`` times and until they
    took ``min_seconds`` (at most ``max_repeats``). Runtimes are cumulative per
    step (min, median and max). Without an exact run (``exact.beliefs`` None)
    only top-p is timed and TV, speedup and evidence error are NaN: the
    certificate is then the measure of the error.
    """
    dense, sparse = [], []
    pair = (model.hmm, approximation.hmm) if exact.beliefs is not None else (approximation.hmm,)
    start = time.perf_counter()
    with _threadpools().limit(limits=threads, user_api="blas"):
        while len(sparse) < repeats or (
            time.perf_counter() - start < min_seconds and len(sparse) < max_repeats
        ):
            for hmm in pair if len(sparse) % 2 == 0 else pair[::-1]:
                result = filtering(hmm, exact.observations)
                (dense if hmm is model.hmm else sparse).append(result)
    steps = exact.observations.size
    sparse_time = np.array([r.elapsed for r in sparse])
    dense_time = np.array([r.elapsed for r in dense]) if dense else np.full((1, steps), np.nan)
    approximate_run = sparse[0]
    bounds = tv_bounds(p, mixed["gamma"], np.arange(steps))
    measured = exact.beliefs if exact.beliefs is not None else np.nan
    filtered = mode == "filter"
    certificate = tv_certificate(
        mixed["gamma"], approximation.prior_kept, approximation.row_kept, approximate_run.beliefs
    )
    series = [
        total_variation(measured, approximate_run.beliefs),
        bounds["recursive"],
        np.full(certificate.shape, np.nan) if filtered else certificate,
        *(
            statistic(times, axis=0)
            for times in (dense_time, sparse_time)
            for statistic in (np.median, np.min, np.max)
        ),
    ]
    scalars = [
        bounds["mixing"][0],
        np.median(dense_time[:, -1] / sparse_time[:, -1]),
        len(sparse),
        exact.log_evidence if filtered else np.nan,
        approximate_run.log_evidence - exact.log_evidence if filtered else np.nan,
        approximate_run.zero_evidence.size,
        approximation.sparsity,
        approximation.nnz,
        approximation.build_time,
        model.build_time,
        mixed["gamma"],
        mixed["gamma_time"],
        mixed["doeblin"],
        mixed["gamma_exact"],
    ]
    return CellResult(np.array(series), np.array(scalars, dtype=np.float64))


def run_model(
    family: str,
    n_states: int,
    seed: int,
    params: dict,
    cells: list[tuple[float, str]],
    horizon: int,
    observe_every: int,
    gamma_exact_max_states: int,
    run_exact: bool,
    **timing,
) -> list[CellResult]:
    """Every listed ``(p, mode)`` cell of one model in one task, sharing its work.

    For small models, where a task's own cost would dwarf the work: the model,
    gamma, one reference per mode and one top-p model per p are each computed
    once, exactly as the fine-grained graph does, then each cell in turn.
    """
    model = build(family, n_states, seed, params)
    mixed = mixing(model, n_states <= gamma_exact_max_states)
    references = {m: reference(model, m, horizon, observe_every, seed, run_exact) for _, m in cells}
    approximations = {p: approximate(model, p) for p, _ in cells}
    return [
        run_cell(model, approximations[p], references[m], mixed, p, m, **timing) for p, m in cells
    ]
