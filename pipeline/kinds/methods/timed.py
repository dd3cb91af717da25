"""The timing task of the methods kind: one exact reference of a model, mode and seed timed
in rounds with every approximation of its cells (``pipeline.sweep.timing.Timing.rounds``),
so every cell is measured against the same exact runs, each made moments apart from its
own. The accuracy of a cell is ``tasks``'s: this module only times.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import cast

import numpy as np

from pipeline.inference import filtering, filtering_chunks
from pipeline.kinds.methods import sequence
from pipeline.kinds.methods.records import (
    Built,
    Model,
    Reference,
    Timed,
    Unbuilt,
    history_steps,
)
from pipeline.models import HMM
from pipeline.sweep.timing import Timing


def _elapsed(hmm: HMM, observed: np.ndarray, prune: float) -> np.ndarray:
    """The cumulative seconds of every step of one run that keeps only what it must: the
    whole history where it fits ``HISTORY_BYTES``, else chunks (between which the clock
    stops)."""
    chunk = history_steps(observed.size, hmm.n_states)
    if chunk >= observed.size:
        return filtering(hmm, observed, prune=prune).elapsed
    parts, offset = [], 0.0
    for part in filtering_chunks(hmm, observed, chunk=chunk, prune=prune):
        parts.append(part.elapsed + offset)
        offset = parts[-1][-1]
    return np.concatenate(parts)


def _runner(mode: str, observed: np.ndarray):
    """``run(hmm, prune)``: one run of ``mode`` on ``observed``, its cumulative seconds per
    step (the sequence modes: the whole run's, at the last step)."""
    if mode in sequence.MODES:
        return lambda hmm, prune: sequence.elapsed(
            mode, hmm, observed, history_steps(observed.size, hmm.n_states)
        )
    return lambda hmm, prune: _elapsed(hmm, observed, prune)


def timed_runs(
    model: Model,
    exact: Reference,
    *built: Built | Unbuilt,
    which: tuple[tuple[str, float], ...],
    mode: str,
    timing: Timing,
) -> Timed:
    """The exact run of ``mode`` and the approximations ``built`` (their ``(method,
    setting)`` in ``which``, in order) timed in rounds (``Timing.rounds``), so that every
    cell of this model, mode and seed is measured against the same exact runs, each made
    moments apart from its own. Not timed: an approximation that was not built, or has no
    run in ``mode`` (``sequence.runs``); the exact run where none is (``exact.run`` false)
    or nothing else is timed."""
    run = _runner(mode, exact.observations)
    runs: dict[str | tuple[str, float], Callable[[], np.ndarray]] = {
        key: functools.partial(run, done.approximation.hmm, done.approximation.prune)
        for key, done in zip(which, built, strict=True)
        if isinstance(done, Built)
        and (mode not in sequence.MODES or sequence.runs(done.approximation, mode))
    }
    if runs and exact.run:
        runs = {"exact": functools.partial(run, model.hmm, 1.0), **runs}
    found = {key: np.array(times) for key, times in timing.rounds(runs).items() if times}
    exact_times = found.pop("exact", None)
    # the rest are keyed (method, setting)
    return Timed(exact_times, cast(dict[tuple[str, float], np.ndarray], found))
