"""How every sweep kind times its runs: one policy, runs interleaved in rounds.

``Timing.rounds`` takes the runs to compare (an exact reference and its approximations,
say) and calls each once per round, in order on even rounds and reversed on odd ones, so
the k-th runs of all of them are made moments apart and a ratio of two is like with like
while the machine's load changes. Rounds go on until ``repeats`` of them and
``min_seconds`` in all, at most ``max_repeats``, with BLAS and numba's parallel steps
fixed to ``threads``.
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

    def rounds(self, runs: Mapping[Hashable, Callable[[], Result]]) -> dict[Hashable, list]:
        """Each of ``runs`` called once per round (in order on even rounds, reversed on odd
        ones); what each returned, in round order. With timing off, no round."""
        found: dict[Hashable, list] = {name: [] for name in runs}
        if not self.enabled or not runs:
            return found
        order, done = list(runs), 0
        start = time.perf_counter()
        with self.fixed_threads():
            while done < self.repeats or (
                time.perf_counter() - start < self.min_seconds and done < self.max_repeats
            ):
                for name in order if done % 2 == 0 else order[::-1]:
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
        numba.set_num_threads(min(self.threads, numba.config.NUMBA_NUM_THREADS))
        try:
            with _threadpools().limit(limits=self.threads, user_api="blas"):
                yield
        finally:
            numba.set_num_threads(before)


def clocked(run: Callable[[], Result]) -> Callable[[], tuple[Result, float]]:
    """``run`` returning its result and the seconds it took."""

    def call() -> tuple[Result, float]:
        start = time.perf_counter()
        result = run()
        return result, time.perf_counter() - start

    return call


@functools.cache
def _threadpools() -> ThreadpoolController:
    """This process's thread pools, found once (finding them reads the loaded libraries)."""
    return ThreadpoolController()


def blas_threads() -> int:
    """Threads of the BLAS numpy uses in this process."""
    blas = _threadpools().select(user_api="blas").lib_controllers
    return max((pool.num_threads for pool in blas), default=1)
