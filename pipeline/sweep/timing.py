"""How every sweep kind times its runs: one policy, each run warmed up, then timed in rounds.

Warm-up: a run's first call in a worker process pays for what its later calls do not:
numba compiling its kernels or loading them from its cache, caches filled (a model's
layout, the CPU's) and pages touched for the first time. None of that is the method's
cost. So every run is first called once untimed, in its worker process and with the
threads of its timed calls, and then timed (``Timing.rounds``, ``once``).

The rule for expensive calls: a warm-up call that took at least ``LONG_CALL`` seconds is not
made again but kept as the run's first timed call. Its one-off costs are a small share of
so long a call, while calling it again would double the task (the exact run of a 10^7-state
model, ``experiment=scale_10m``); its cheaper approximations are still warmed. Discarding
the first of several timed rounds instead would cost the same call, and leave a sweep of
one round (``timing.repeats=1``) nothing. Work that cannot be called twice warms up on a
stand-in of the same code: a training epoch changes the model, so
``pipeline.hmmlm.train.train`` first computes the gradients of two batches and an Adam step
on scratch arrays, its model untouched (two steps of an epoch's hundreds).

A warm-up draws no random number its timed call would (every run here is seeded or
deterministic), so it changes no computed value. The variables a kind's schema marks
``timed`` say how they were warmed up in their ``warmup`` attribute (``WARMUP``).

Rounds: ``Timing.rounds`` takes the runs to compare (an exact reference and its
approximations, say) and calls each once per round, in order on even rounds and reversed
on odd ones, so the k-th runs of all of them are made moments apart and a ratio of two is
like with like while the machine's load changes. Rounds go on until ``repeats`` of them
and ``min_seconds`` of timed calls in all, at most ``max_repeats``, with BLAS and numba's
parallel steps fixed to ``threads``.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numba
from threadpoolctl import ThreadpoolController

Result = TypeVar("Result")
Name = TypeVar("Name", bound=Hashable)

LONG_CALL = 10.0
"""Seconds: a warm-up call at least this long is kept as its run's first timed call."""

WARMUP = (
    "each timed call made after one untimed call of the same run in its worker process "
    "(compilation, caches and pages touched first are not timed), but a call of at least "
    f"{LONG_CALL:g} s, which is its own warm-up; a training epoch after the untimed gradients "
    "of two batches and an Adam step on scratch arrays (pipeline.sweep.timing)"
)
"""The ``warmup`` attribute of every variable a schema marks ``timed``."""


@dataclass(frozen=True)
class Timing:
    """How runs are timed: a kind's timing settings, normalised once."""

    repeats: int
    """The least number of rounds."""
    min_seconds: float = 0.0
    """Rounds go on until they took this long in all (at most ``max_repeats``)."""
    max_repeats: int = 1
    """The most rounds, however short the runs."""
    threads: int | None = None
    """BLAS and numba's parallel steps fixed to this many threads while timing (numba's at
    most the cores it has); None: left as they are."""
    enabled: bool = True
    """False: nothing is timed (``rounds`` returns no runs)."""

    def rounds(self, runs: Mapping[Name, Callable[[], Result]]) -> dict[Name, list[Result]]:
        """Each of ``runs`` called once untimed (``_warm_up``), then once per round (in
        order on even rounds, reversed on odd ones); what each returned, in round order.
        With timing off, no call."""
        if not self.enabled or not runs:
            return {name: [] for name in runs}
        order, done = list(runs), 0
        with self.fixed_threads():
            start = time.perf_counter()
            found, untimed = _warm_up(runs)
            start += untimed  # the warm-up calls kept are timed calls, the others are not
            while done < self.repeats or (
                time.perf_counter() - start < self.min_seconds and done < self.max_repeats
            ):
                for name in order if done % 2 == 0 else order[::-1]:
                    if len(found[name]) == done:  # not a long warm-up kept as this round
                        found[name].append(runs[name]())
                done += 1
        return found

    @contextlib.contextmanager
    def fixed_threads(self) -> Iterator[None]:
        """BLAS and numba's parallel steps fixed to ``threads`` in this thread, restored
        after (nothing changed where ``threads`` is None)."""
        if self.threads is None:
            yield
            return
        before = numba.get_num_threads()
        # numba's config sets its attributes when it reads the environment: no stub has them
        numba.set_num_threads(min(self.threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
        try:
            with _threadpools().limit(limits=self.threads, user_api="blas"):
                yield
        finally:
            numba.set_num_threads(before)


def _warm_up(
    runs: Mapping[Name, Callable[[], Result]],
) -> tuple[dict[Name, list[Result]], float]:
    """Each of ``runs`` called once, in order, untimed: name -> ``[]``, or the call's
    result where it took at least ``LONG_CALL`` seconds (its first timed call); and the
    seconds of the calls not kept. A result not kept is dropped before the next call, so
    a warm-up holds no more memory than the timed calls do."""
    found: dict[Name, list[Result]] = {}
    untimed = 0.0
    for name, run in runs.items():
        start = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - start
        found[name] = [result] if seconds >= LONG_CALL else []
        untimed += 0.0 if found[name] else seconds
        del result
    return found, untimed


def clocked(run: Callable[[], Result]) -> Callable[[], tuple[Result, float]]:
    """``run`` returning its result and the seconds it took."""

    def call() -> tuple[Result, float]:
        start = time.perf_counter()
        result = run()
        return result, time.perf_counter() - start

    return call


def once(run: Callable[[], Result]) -> tuple[Result, float]:
    """One timed call of ``run`` after its warm-up (the module's rule): what it returned
    and the seconds it took."""
    ((result, seconds),) = Timing(repeats=1).rounds({"run": clocked(run)})["run"]
    return result, seconds


@functools.cache
def _threadpools() -> ThreadpoolController:
    """This process's thread pools, found once (finding them reads the loaded libraries)."""
    return ThreadpoolController()


def blas_threads() -> int:
    """Threads of the BLAS numpy uses in this process."""
    blas = _threadpools().select(user_api="blas").lib_controllers
    return max((pool.num_threads for pool in blas), default=1)
