"""What the Dask workers run: models, gamma, exact references, approximations, cells.

Pure functions of their arguments (no printing, no I/O but a reference's history too
large for memory, written to the worker's disk: ``spilled``), so the plan can
recompute any of them on another worker. The forward modes (``predict``, ``filter``) are
measured here, the modes that read the whole sequence (``smooth``, ``decode``) in
``sequence``, under the same references; every run is timed in ``timed``. Arguments that
describe work are named, frozen specs passed by keyword. A cell returns its
``results.MethodsRecord``: a field per result variable, an array over t or a number.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from pipeline.inference import FilterResult, filtering, filtering_chunks
from pipeline.kinds.methods import resident, sequence, spilled
from pipeline.kinds.methods.records import (
    Built,
    Mixing,
    Model,
    ModelSpec,
    Reference,
    Timed,
    Unbuilt,
    history_steps,
)
from pipeline.kinds.methods.results import MethodsRecord
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
from pipeline.sweep.failures import TRANSIENT
from pipeline.sweep.timing import Timing, once

SAMPLING_STREAM = 0x5EED
"""Mixed into the seed of the observation sampler, apart from the model's own draws."""


def build(spec: ModelSpec) -> Model:
    """The exact model of a grid point, timed after its warm-up (``timing.once``)."""
    return Model(
        *once(lambda: build_model(spec.family, spec.n_states, seed=spec.seed, **spec.params))
    )


def observations(hmm: HMM, *, mode: str, horizon: int, observe_every: int, seed: int):
    """The state path and observation sequence of a mode, each shape (horizon + 1,).

    ``predict``: nothing observed (-1 everywhere, states too). ``filter``, ``smooth`` and
    ``decode``: the same path sampled from the exact model with ``seed``, observed at steps
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
    """What every cell of this model and mode is measured against.

    With ``run`` false (an exact reference too big to compute) only the
    observations are drawn: the cells then measure the approximation alone and
    its error through the certificate. A history too large to keep whole is computed
    chunk by chunk (``history_steps``) and written to the worker's disk as it goes.
    ``smooth`` keeps the smoothed posteriors so, ``decode`` the Viterbi path (none, and
    ``run`` false, where the exact model has no max-product step).
    """
    states, observed = observations(
        model.hmm, mode=mode, horizon=horizon, observe_every=observe_every, seed=seed
    )
    if not run:
        return Reference(observed, states, None, np.nan, run)
    if mode == "decode":
        path = sequence.decode_reference(model.hmm, observed)
        return Reference(observed, states, None, np.nan, path is not None, path)
    n = model.hmm.n_states
    chunk = history_steps(observed.size, n)
    if mode == "smooth":
        history, log_evidence = sequence.smooth_reference(model.hmm, observed, chunk)
        return Reference(observed, states, history, log_evidence, run)
    if chunk >= observed.size:
        result = filtering(model.hmm, observed)
        assert isinstance(result, FilterResult), "one sequence's"
        return Reference(observed, states, result.beliefs, result.log_evidence, run)
    spill = spilled.Spill((observed.size, n))
    for part in filtering_chunks(model.hmm, observed, chunk=chunk):
        if not spill.write(part.beliefs):
            break
    history = spill.close()
    return Reference(observed, states, history, part.log_evidence if history else np.nan, run)


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


class Accuracy(NamedTuple):
    """What the approximate run measures against the exact one, step by step."""

    tv: np.ndarray  # (T,): TV(P_t, Q_t), NaN without an exact run
    errors: np.ndarray  # (T,): the most TV each step adds (``metrics.step_errors``)
    work: list  # (T - 1,): multiply-adds of each step (``operators.step_work``)
    log_evidence: float  # exact, NaN without an exact run
    log_evidence_approx: float
    zero_evidence: int  # steps whose observation the approximate belief made impossible


@contextlib.contextmanager
def _exact_chunks(model: Model, exact: Reference, chunk: int) -> Iterator[Iterator[tuple]]:
    """The exact side of ``_accuracy``: for each chunk of ``chunk`` steps, its beliefs
    (c, n_states) and the log evidence so far, read from the reference's history (in
    memory or on this machine's disk), else computed here; None and NaN without an exact
    run."""
    steps = exact.observations.size
    spans = [(start, min(start + chunk, steps)) for start in range(0, steps, chunk)]
    with spilled.rows_of(exact.beliefs, spans) as rows:
        if rows is not None:
            yield ((beliefs, exact.log_evidence) for beliefs in rows)
        elif exact.run:
            parts = filtering_chunks(model.hmm, exact.observations, chunk=chunk)
            yield ((part.beliefs, part.log_evidence) for part in parts)
        else:
            yield itertools.repeat((None, np.nan))


def _accuracy(model: Model, approximation: Approximation, exact: Reference, timing) -> Accuracy:
    """The approximate run against the exact one, a chunk of steps at a time
    (``history_steps``), each step reduced as it goes: the memory of a chunk, never of the
    whole horizon where it does not fit. The approximate run has the timed runs' threads;
    an exact run computed here (its history could not be read) the reference's, so every
    value is the one a whole run gives."""
    observed, hmm = exact.observations, approximation.hmm
    T = hmm.transition
    chunk = history_steps(observed.size, hmm.n_states)
    approx = filtering_chunks(hmm, observed, chunk=chunk, prune=approximation.prune)
    tv, errors = [], []
    work: list[int] = []
    log_evidence, zero_evidence, previous, last = exact.log_evidence, 0, None, None
    with _exact_chunks(model, exact, chunk) as exacts:
        while True:
            with timing.fixed_threads():
                part = next(approx, None)
            if part is None:
                break
            reference, log_evidence = next(exacts)
            tv.append(
                np.full(len(part.beliefs), np.nan)  # no exact run: no error to measure
                if reference is None
                else total_variation(reference, part.beliefs)
            )
            errors.append(
                step_errors(
                    approximation.prior_error,
                    approximation.row_error,
                    part.beliefs,
                    part.pruned,
                    previous=previous,
                )
            )
            before = part.beliefs[:-1] if previous is None else [previous, *part.beliefs[:-1]]
            work.extend(step_work(T, row != 0) for row in before)
            zero_evidence += int(part.zero.sum())
            previous, last = part.beliefs[-1].copy(), part
    assert last is not None, "at least one step"
    return Accuracy(
        np.concatenate(tv),
        np.concatenate(errors),
        work,
        log_evidence,
        last.log_evidence,
        zero_evidence,
    )


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


def _forward_measures(
    model: Model, approximation: Approximation, exact: Reference, mixed: Mixing, *, mode, timing
) -> dict[str, Any]:
    """What a cell of ``predict`` or ``filter`` measures against its reference (``_accuracy``):
    TV at every step, the certificate (prediction only), the work of a step and the evidence
    (filtering only)."""
    accuracy = _accuracy(model, approximation, exact, timing)
    filtered = mode == "filter"
    certificate = tv_certificate(mixed.gamma, accuracy.errors)
    return {
        "tv": accuracy.tv,
        "tv_max": np.nan,
        "certificate": np.full(certificate.shape, np.nan) if filtered else certificate,
        "work": float(np.mean(accuracy.work)) if accuracy.work else np.nan,
        "log_evidence": accuracy.log_evidence if filtered else np.nan,
        "log_evidence_error": (
            accuracy.log_evidence_approx - accuracy.log_evidence if filtered else np.nan
        ),
        "zero_evidence": accuracy.zero_evidence,
        "path_disagreement": np.nan,
        "log_probability_gap": np.nan,
        "paths_equal": np.nan,
    }


def _sequence_measures(
    model: Model, approximation: Approximation, exact: Reference, mixed: Mixing, *, mode, timing
) -> dict[str, Any]:
    """What a cell of ``smooth`` or ``decode`` measures against its reference (``sequence``);
    no certificate and no work per step: they are the forward recursion's."""
    steps = exact.observations.size
    threads = timing.fixed_threads
    if mode == "smooth":
        history = history_steps(steps, model.hmm.n_states)
        found = sequence.smooth_measures(
            model.hmm, approximation, exact, history=history, threads=threads
        )
    else:
        found = sequence.decode_measures(model.hmm, approximation, exact, threads=threads)
    return found | {"certificate": np.full(steps, np.nan), "work": np.nan}


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
    horizon. Runtimes are cumulative per step (median, min and max over rounds; the
    sequence modes time whole runs, stored at the last step); the exact ones are those of
    every cell of this model, mode and seed. Without an exact run (``exact.run`` false)
    only the approximation is timed and TV, speedup and evidence error are NaN: the
    certificate is then the measure of the error. Bounds are for prediction; the
    certificate is NaN with observations. The accuracy pass holds the approximate run
    against the exact one chunk by chunk (``_forward_measures``, ``_sequence_measures``).
    The worker's peak resident memory while the cell runs is stored beside its
    ``estimate`` (bytes, NaN: none). An approximation that was not built raises its
    method's error.
    """
    if isinstance(built, Unbuilt):
        raise built.error
    measured = resident.reset_peak()
    approximation = built.approximation
    measure = _sequence_measures if mode in sequence.MODES else _forward_measures
    values = measure(model, approximation, exact, mixed, mode=mode, timing=timing)
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
