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

from pipeline.kinds.methods.modes import Reference, lookup
from pipeline.kinds.methods.records import Built, Model, Timed, Unbuilt
from pipeline.sweep.timing import Timing


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
    run in ``mode`` (``Mode.supports``); the exact run where none is (``exact.run`` false)
    or nothing else is timed. A run is the mode's (``Mode.run``)."""
    found_mode = lookup(mode)
    run = functools.partial(found_mode.run, observed=exact.observations)
    runs: dict[str | tuple[str, float], Callable[[], np.ndarray]] = {
        key: functools.partial(run, done.approximation.hmm, prune=done.approximation.prune)
        for key, done in zip(which, built, strict=True)
        if isinstance(done, Built) and found_mode.supports(done.approximation)
    }
    if runs and exact.run:
        runs = {"exact": functools.partial(run, model.hmm, prune=1.0), **runs}
    found = {key: np.array(times) for key, times in timing.rounds(runs).items() if times}
    exact_times = found.pop("exact", None)
    # the rest are keyed (method, setting)
    return Timed(exact_times, cast(dict[tuple[str, float], np.ndarray], found))
