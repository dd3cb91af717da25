"""What the Dask workers run: models, gamma, exact references, approximations, cells.

Pure functions of their arguments (no printing, no I/O but a reference's history too
large for memory, written to the worker's disk: ``spilled``), so the plan can
recompute any of them on another worker. A cell's mode (``modes``) computes its reference and
its measures; every run is timed in ``timed``. Arguments that
describe work are named, frozen specs passed by keyword. A cell returns its
``results.MethodsRecord``: a field per result variable, an array over t or a number.
"""

from __future__ import annotations

import numpy as np

from pipeline.kinds.methods import resident, spilled
from pipeline.kinds.methods.modes import Reference, lookup
from pipeline.kinds.methods.records import Built, Mixing, Model, ModelSpec, Timed, Unbuilt
from pipeline.kinds.methods.results import MethodsRecord
from pipeline.methods import approximate
from pipeline.metrics import (
    doeblin_lower_bound,
    error_bounds,
    minimal_mixing_rate,
    mixing_rate_part,
    sparsity,
)
from pipeline.models import HMM, build_model
from pipeline.operators import entries_at, stored_entries
from pipeline.sampling import sample
from pipeline.sweep.failures import TRANSIENT
from pipeline.sweep.timing import Timing, once

SAMPLING_STREAM = 0x5EED
"""Mixed into the seed of the observation sampler, apart from the model's own draws."""


def build(spec: ModelSpec, *after) -> Model:
    """The exact model of a grid point, timed after its warm-up (``timing.once``). ``after``:
    the results (None) of the tasks it waits for (``plan.submit``: the cells of the models
    that do not fit beside it), unused."""
    return Model(
        *once(lambda: build_model(spec.family, spec.n_states, seed=spec.seed, **spec.params))
    )


def observations(hmm: HMM, *, mode: str, horizon: int, observe_every: int, seed: int):
    """The state path and observation sequence of a mode, each shape (horizon + 1,).

    A mode that observes nothing (``predict``): -1 everywhere, states too. Every other mode:
    the same path sampled from the exact model with ``seed``, observed at steps
    ``t % observe_every == 0``.
    """
    if not lookup(mode).observed:
        return np.full(horizon + 1, -1), np.full(horizon + 1, -1)
    states, symbols = sample(hmm, horizon + 1, np.random.default_rng([seed, SAMPLING_STREAM]))
    symbols[np.arange(horizon + 1) % observe_every != 0] = -1
    return states, symbols


def reference(
    model: Model, *, mode: str, horizon: int, observe_every: int, seed: int, run: bool
) -> Reference:
    """What every cell of this model and mode is measured against: the mode's exact run
    (``Mode.reference``). With ``run`` false (an exact reference too big to compute) only
    the observations are drawn: the cells then measure the approximation alone and its error
    through the certificate. A history too large to keep whole is written to the worker's
    disk as it goes (``spilled``).
    """
    states, observed = observations(
        model.hmm, mode=mode, horizon=horizon, observe_every=observe_every, seed=seed
    )
    if not run:
        return Reference(observed, states, None, np.nan, run)
    exact = lookup(mode).reference(model.hmm, observed, disk=spilled)
    return Reference(observed, states, exact.beliefs, exact.log_evidence, exact.run, exact.path)


def mixing_part(model: Model, *, part: int, parts: int) -> tuple[float, float]:
    """One of ``parts`` shares of gamma's pair search, and the seconds it took (after its
    warm-up, ``timing.once``)."""
    return once(lambda: mixing_rate_part(model.hmm.transition, part, parts))


def mixing(model: Model, *parts: tuple[float, float], exact: bool) -> Mixing:
    """gamma from the ``parts`` of its pair search (``mixing_part``), or on one thread here.

    Without ``exact``, gamma is the Doeblin lower bound, O(nnz + n) where the
    pair search costs O(n^2) pairs; the bounds built on it stay valid, only looser. Its
    seconds are those of the parts and of what is done here, each timed after its warm-up
    (``timing.once``).
    """
    T = model.hmm.transition

    def compute() -> tuple[float, float]:
        doeblin = doeblin_lower_bound(T)
        if not exact:
            return doeblin, doeblin
        if parts:
            return min(1.0, min(least for least, _ in parts)), doeblin
        return minimal_mixing_rate(T, threads=1), doeblin

    (gamma, doeblin), seconds = once(compute)
    return Mixing(gamma, doeblin, exact, seconds + sum(part for _, part in parts))


def build_approximation(model: Model, *, method: str, setting: float) -> Built | Unbuilt:
    """The approximation of the model by ``method`` at ``setting``, timed after its
    warm-up (``timing.once``); the method's own error kept (``TRANSIENT`` ones raised, to
    be tried again)."""
    try:
        approximation, seconds = once(lambda: approximate(model.hmm, method, setting))
    except TRANSIENT:
        raise
    except Exception as error:  # the method's own, whatever it is: its cells raise it
        return Unbuilt(error)
    T = approximation.hmm.transition
    return Built(approximation, seconds, sparsity(T), stored_entries(T))


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
    built: Built | Unbuilt,
    exact: Reference,
    mixed: Mixing,
    timed: Timed,
    *,
    which: tuple[str, float],
    mode: str,
    timing: Timing,
    estimate: float = np.nan,
) -> MethodsRecord:
    """Measure the error and the cost of the approximation ``built`` (``which``: its
    method and setting) against the exact reference.

    The speedup is a ratio of runs made moments apart: the median over the rounds of
    ``timed`` (``timed.timed_runs``) of each round's exact over approximate runtime of the whole
    horizon. Runtimes are cumulative per step (median, min and max over rounds; a mode
    without a per-step clock times whole runs, stored at the last step); the exact ones are those of
    every cell of this model, mode and seed. Without an exact run (``exact.run`` false)
    only the approximation is timed and TV, speedup and evidence error are NaN: the
    certificate is then the measure of the error. Bounds are for prediction; the
    certificate is NaN with observations. The accuracy pass holds the approximate run
    against the exact one as the mode measures it (``Mode.measures``).
    The worker's peak resident memory while the cell runs is stored beside its
    ``estimate`` (bytes, NaN: none). An approximation that was not built raises its
    method's error.
    """
    if isinstance(built, Unbuilt):
        raise built.error
    measured = resident.reset_peak()
    approximation = built.approximation
    values = lookup(mode).measures(
        model.hmm,
        approximation,
        exact,
        gamma=mixed.gamma,
        threads=timing.fixed_threads,
        disk=spilled,
    )
    steps = exact.observations.size
    untimed = np.full((1, steps), np.nan)
    approx_time = timed.approx.get(which, untimed)
    exact_time = timed.exact if timed.exact is not None and which in timed.approx else untimed
    eps, start = approximation.step_error, approximation.start_error
    bounds = error_bounds(min(eps, 1.0), mixed.gamma, np.arange(steps), start=min(start, 1.0))
    runtimes = {
        f"runtime_{run}{suffix}": statistic(times, axis=0)
        for run, times in (("exact", exact_time), ("approx", approx_time))
        for suffix, statistic in (("", np.median), ("_min", np.min), ("_max", np.max))
    }
    return MethodsRecord(
        **values,
        bound=bounds["recursive"],
        bound_linear=bounds["linear"],
        **runtimes,
        bound_mixing=float(bounds["mixing"][0]),
        eps=eps,
        eps_start=start,
        eps_mean=float(approximation.row_error.mean()) + approximation.prune_error,
        speedup=float(np.median(exact_time[:, -1] / approx_time[:, -1])),
        repeats=len(timed.approx.get(which, ())),
        impossible_observations=_impossible(approximation.hmm, exact),
        sparsity=built.sparsity,
        stored_entries=built.stored_entries,
        build_time_approx=built.build_time,
        build_time_model=model.build_time,
        gamma=mixed.gamma,
        gamma_time=mixed.seconds,
        doeblin=mixed.doeblin,
        gamma_exact=float(mixed.exact),
        memory_peak=resident.peak() if measured else np.nan,
        memory_estimate=estimate,
    )
