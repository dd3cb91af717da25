"""What the Dask workers run: models, exact references, gamma, top-p models, cells.

Pure functions of their arguments (no I/O, no printing), so the task graph
can recompute any of them on another worker. A cell returns a dict mapping
result variable names (``pipeline.store.VARIABLES``) to values.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from pipeline.inference import filtering
from pipeline.metrics import (
    doeblin_lower_bound,
    minimal_mixing_rate,
    sparsity,
    total_variation,
    tv_bounds,
)
from pipeline.models import HMM, build_model
from pipeline.sampling import sample
from pipeline.topp import topp_hmm

SAMPLING_STREAM = 0x5EED
"""Mixed into the seed of the observation sampler, apart from the model's own draws."""


class Model(NamedTuple):
    hmm: HMM
    build_time: float


class Reference(NamedTuple):
    """The exact run of one model in one mode."""

    observations: np.ndarray  # (horizon + 1,), -1 where nothing is observed
    beliefs: np.ndarray  # (horizon + 1, n_states)
    log_evidence: float


class Approximation(NamedTuple):
    hmm: HMM
    build_time: float
    sparsity: float
    nnz: int


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


def reference(model: Model, mode: str, horizon: int, observe_every: int, seed: int) -> Reference:
    """The exact run every cell of this model and mode is measured against."""
    observed = observations(model.hmm, mode, horizon, observe_every, seed)
    result = filtering(model.hmm, observed)
    return Reference(observed, result.beliefs, result.log_evidence)


def mixing(model: Model) -> dict[str, float]:
    """gamma, its Doeblin lower bound and the time gamma took (one thread)."""
    start = time.perf_counter()
    gamma = minimal_mixing_rate(model.hmm.transition, threads=1)
    return {
        "gamma": gamma,
        "gamma_time": time.perf_counter() - start,
        "doeblin": doeblin_lower_bound(model.hmm.transition),
    }


def approximate(model: Model, p: float) -> Approximation:
    """The top-p model, timed, with its transition matrix's sparsity."""
    start = time.perf_counter()
    hmm = topp_hmm(model.hmm, p)
    elapsed = time.perf_counter() - start
    return Approximation(hmm, elapsed, sparsity(hmm.transition), int(hmm.transition.nnz))


def blas_threads() -> int:
    """Threads of the BLAS numpy uses in this process."""
    return max(
        (pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"), default=1
    )


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
) -> dict[str, object]:
    """Time exact dense and top-p sparse inference side by side; measure the error.

    The two runs alternate (dense first on even repeats, sparse first on odd
    ones) with BLAS fixed to ``threads``, so the speedup is a ratio of runs
    made moments apart: the median over repeats of the per-repeat ratio of
    total runtimes. Pairs repeat at least ``repeats`` times and until they
    took ``min_seconds`` (at most ``max_repeats``). Runtimes are cumulative per
    step (min, median and max).
    """
    dense, sparse = [], []
    pair = (model.hmm, approximation.hmm)
    start = time.perf_counter()
    with threadpool_limits(limits=threads, user_api="blas"):
        while len(dense) < repeats or (
            time.perf_counter() - start < min_seconds and len(dense) < max_repeats
        ):
            for hmm in pair if len(dense) % 2 == 0 else pair[::-1]:
                result = filtering(hmm, exact.observations)
                (dense if hmm is model.hmm else sparse).append(result)
    dense_time = np.array([r.elapsed for r in dense])
    sparse_time = np.array([r.elapsed for r in sparse])
    approximate_run = sparse[0]
    bounds = tv_bounds(p, mixed["gamma"], np.arange(exact.beliefs.shape[0]))
    return {
        "tv": total_variation(exact.beliefs, approximate_run.beliefs),
        "bound": bounds["recursive"],
        "bound_mixing": bounds["mixing"][0],
        "runtime_dense": np.median(dense_time, axis=0),
        "runtime_dense_min": dense_time.min(axis=0),
        "runtime_dense_max": dense_time.max(axis=0),
        "runtime_sparse": np.median(sparse_time, axis=0),
        "runtime_sparse_min": sparse_time.min(axis=0),
        "runtime_sparse_max": sparse_time.max(axis=0),
        "speedup": float(np.median(dense_time[:, -1] / sparse_time[:, -1])),
        "repeats": float(len(dense)),
        "log_evidence": exact.log_evidence if mode == "filter" else np.nan,
        "log_evidence_error": approximate_run.log_evidence - exact.log_evidence
        if mode == "filter"
        else np.nan,
        "zero_evidence": float(approximate_run.zero_evidence.size),
        "sparsity": approximation.sparsity,
        "nnz": float(approximation.nnz),
        "build_time_topp": approximation.build_time,
        "build_time_model": model.build_time,
        **mixed,
    }
