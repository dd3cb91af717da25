"""What a mode of the methods sweep is: the ``Mode`` base class, whose defaults say what a
mode may leave out, and the records its runs hand the sweep.

A mode is one way of running inference on a model against which an approximation is
measured (``predict``, ``filter``, ...): what it observes, how its exact reference is
computed, what a cell of it measures and stores, how one run of it is timed, what memory a
run holds, which approximations have a run in it, and its part of the methods report. The
sweep (``tasks``, ``timed``, ``memory``), the store's schema (``results``) and the report
ask a mode, never its name. No Dask and no Hydra: a reader of stores imports this; what a
run keeps on the worker's disk the sweep hands in (``Disk``).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from pipeline.hmm import HMM
from pipeline.methods import Approximation

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure

HISTORY_BYTES = 2**29
"""A cell keeps at most this many bytes of a run's beliefs at a time: the whole horizon where
it fits (every committed experiment's cells), else chunks of as many steps as fit, so a
cell's memory does not grow with the horizon."""


def history_steps(steps: int, n_states: int) -> int:
    """Steps of beliefs a run keeps at a time (``HISTORY_BYTES``), at least one."""
    return max(1, min(steps, HISTORY_BYTES // (8 * n_states)))


class Reference(NamedTuple):
    """The observations of one model, mode and seed, and their exact run, which every cell
    of the model, mode and seed is measured against: ``beliefs`` (the mode's exact beliefs
    of every step: predicted, filtered, smoothed) is the whole exact history where it fits
    ``HISTORY_BYTES``, else that history on the worker's disk (``Disk``), or None where it
    could not be written or the mode keeps none (each cell then runs exact inference beside
    its approximation, chunk by chunk), or (``run`` false) is not computed at all."""

    observations: np.ndarray  # (horizon + 1,), -1 where nothing is observed
    states: np.ndarray  # (horizon + 1,): the sampled state path, or -1 (nothing observed)
    beliefs: Any  # (horizon + 1, n_states): an ndarray, a history on disk, or None
    log_evidence: float
    run: bool
    path: np.ndarray | None = None  # (horizon + 1,): the exact Viterbi path (decode)


class Exact(NamedTuple):
    """What a mode's exact run of one sequence leaves for its cells (``Mode.reference``)."""

    beliefs: Any  # (steps, n_states) in memory, on disk, or None (kept nowhere)
    log_evidence: float  # NaN where the mode computes none
    run: bool = True  # false: the exact model has no run in this mode
    path: np.ndarray | None = None  # (steps,): a most probable path, for a mode that has one


class Disk(Protocol):
    """Where a history too large for a cell's memory goes (the sweep's ``spilled``): a
    ``Spill(shape)`` written part by part and closed into a history (None: not written), and
    ``rows_of(history, spans)``, a context of the history's rows of each ``(start, stop)``
    (None where it cannot be read here)."""

    def Spill(self, shape: tuple[int, int]) -> Any: ...

    def rows_of(
        self, history: Any, spans: list[tuple[int, int]]
    ) -> AbstractContextManager[Iterator[np.ndarray] | None]: ...


Threads = Callable[[], AbstractContextManager]
"""A context in which the approximate run takes the timed runs' threads."""

MEASURES = (
    "tv",
    "tv_max",
    "certificate",
    "work",
    "log_evidence",
    "log_evidence_error",
    "zero_evidence",
    "path_disagreement",
    "log_probability_gap",
    "paths_equal",
)
"""The variables of a cell that its mode measures (``Mode.measures``); the other variables
of ``results.MethodsRecord`` are the same in every mode."""

STEPPED = ("tv", "certificate")
"""The measures that are arrays over the steps t = 0..horizon; the others are numbers."""


def nothing(steps: int, **given) -> dict[str, Any]:
    """Every measure NaN (an array of ``steps`` NaN for those over t), but those ``given``."""
    return {
        name: np.full(steps, np.nan) if name in STEPPED else np.nan for name in MEASURES
    } | given


def posterior_measures(
    tv: np.ndarray, log_evidence: float, approximate_log_evidence: float, zero_evidence: int
) -> dict[str, Any]:
    """What a mode measuring posteriors against its exact run stores: ``tv`` (steps,) of every
    step, its worst, the exact log evidence and the approximation's error in it, and the
    count of steps of zero evidence; every other measure NaN (``nothing``)."""
    return nothing(
        tv.size,
        tv=tv,
        tv_max=float(tv.max()),
        log_evidence=log_evidence,
        log_evidence_error=approximate_log_evidence - log_evidence,
        zero_evidence=zero_evidence,
    )


def at_end(seconds: float, steps: int) -> np.ndarray:
    """A run's clock as the store keeps it (cumulative per step) for a run without a clock
    per step: only its whole time, at the last step."""
    elapsed = np.full(steps, np.nan)
    elapsed[-1] = seconds
    return elapsed


def timed_whole(run: Callable[[], object], steps: int) -> np.ndarray:
    """The seconds of one call of ``run`` as ``at_end`` keeps them."""
    start = time.perf_counter()
    run()
    return at_end(time.perf_counter() - start, steps)


def span_list(steps: int, segment: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of every segment of ``segment`` steps, in order."""
    return [(start, min(start + segment, steps)) for start in range(0, steps, segment)]


class Kit(NamedTuple):
    """What the methods report hands a mode to draw and tabulate its section with, so that a
    mode (read by every layer) imports nothing of the report: the report's helpers of the
    same names (``report.figures``, ``report.readings``, ``report.tables``, ``results``)."""

    styles: Callable  # (ds) -> {(method, setting): {"color", "marker"}}
    legend: Callable  # (figure, ds, extra=None, *, markers=False)
    log_scale: Callable  # (axis, "x" | "y" | "xy")
    label: Callable  # (method, setting) -> "top-p 0.9"
    markdown_table: Callable  # (header, rows) -> str
    cells: Callable  # (ds) -> [{"family", "n_states", "method", "setting"}]
    models: Callable  # (ds) -> [(family, n_states)]


class Mode:
    """A mode of the methods sweep, its defaults those of a mode that reads the whole
    sequence with no per-step clock and keeps nothing on disk.

    A subclass sets ``name`` (the ``mode`` coordinate and ``methods.grid.modes`` value), ``title``
    (how the report names it), ``produces`` (the variables of ``MEASURES`` it fills: the
    others are NaN in its cells, and their ``missing`` attribute says so) and ``line`` (its
    line style where a figure's panel holds several modes, and ``line_name``, how its
    caption names it), and implements ``reference``, ``measures`` and ``run``; the rest it
    may keep.
    """

    name: str = ""
    title: str = ""
    observed: bool = True
    """Whether its runs condition on the sampled observations (false: nothing observed)."""
    produces: frozenset[str] = frozenset()
    stepped: bool = False
    """Whether a run is clocked step by step and its TV at the last step is the error it
    carries: the runtime figure and the Pareto fronts read these modes."""
    line: Any = "-"
    line_name: str = "solid"
    held_runs: int = 3
    """Runs' worth of beliefs a cell holds at once (``run_bytes``): the reference's, the
    approximation's and the exact side it reads or computes beside it."""
    setting: str | None = None
    """What the setting of a mode that takes one in its name means (``fixed_lag_2``: the lag
    2), None for a mode without one."""
    registered: str = ""
    """The name the mode is registered under: ``name`` but for a mode with a setting."""
    unsupported: str = ""
    """The approximations without a run in this mode (``supports``), in words for the
    ``missing`` attributes; empty: every approximation has one."""

    def at(self, setting: int) -> Mode:
        """This mode at ``setting`` (a mode with a ``setting`` only)."""
        raise ValueError(f"mode {self.name!r} takes no setting")

    def supports(self, approximation: Approximation) -> bool:
        """Whether ``approximation`` has a run in this mode: not belief pruning, which only
        the forward recursion does."""
        return approximation.prune >= 1

    def reference(self, hmm: HMM, observed: np.ndarray, *, disk: Disk) -> Exact:
        """The exact run of ``observed`` (steps,) that every cell of the model is measured
        against."""
        raise NotImplementedError

    def measures(
        self,
        hmm: HMM,
        approximation: Approximation,
        exact: Reference,
        *,
        gamma: float,
        threads: Threads,
        disk: Disk,
    ) -> dict[str, Any]:
        """Every variable of ``MEASURES`` of the cell of ``approximation`` of the exact model
        ``hmm``, against the reference ``exact`` (NaN where the mode does not produce it, or
        where ``supports`` says the approximation has no run). ``gamma`` the exact model's
        mixing rate; the approximate run takes ``threads``."""
        raise NotImplementedError

    def run(self, hmm: HMM, observed: np.ndarray, prune: float) -> np.ndarray:
        """One timed run on ``hmm`` (with belief pruning to ``prune``, where the mode
        supports it), its cumulative seconds per step (steps,): NaN but at the last step for
        a mode without a per-step clock (``at_end``)."""
        raise NotImplementedError

    def run_bytes(self, steps: int, n_states: int) -> int:
        """What one run over ``steps`` steps holds at a time beyond the models and the
        likelihoods: by default every step's beliefs, twice (filtered and the mode's own)."""
        return 2 * steps * 8 * n_states

    def likelihood_bytes(self, steps: int, n_states: int) -> int:
        """The observations' likelihood rows, one per distinct symbol (at most 32 counted)."""
        return 8 * n_states * min(steps, 32)

    def section(self, ds: xr.Dataset, kit: Kit) -> list[str]:
        """The report's section on the run's cells of this mode (and of every mode registered
        under the same name), Markdown lines; none by default."""
        return []

    def figures(self, ds: xr.Dataset, kit: Kit) -> dict[str, Figure]:
        """The report's figures of this mode, by file name; none by default."""
        return {}


@contextlib.contextmanager
def reading(
    disk: Disk, exact: Reference, spans: list[tuple[int, int]], compute: Callable[[], Iterator]
) -> Iterator[Iterator[tuple]]:
    """For each of ``spans`` of ``exact``'s steps, its exact beliefs and the log evidence:
    read from the reference (in memory or on this machine's disk), else from ``compute()``
    (an iterator of the same pairs: exact inference beside the approximation); None and NaN
    without an exact run."""
    with disk.rows_of(exact.beliefs, spans) as rows:
        if rows is not None:
            yield ((beliefs, exact.log_evidence) for beliefs in rows)
        elif exact.run:
            yield compute()
        else:
            yield itertools.repeat((None, np.nan))
