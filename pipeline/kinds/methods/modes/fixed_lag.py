"""The ``fixed_lag_<L>`` modes: fixed-lag smoothing, ``P(S_t | o_0..o_{t+L})``, the posterior
of step ``t`` once ``L`` more observations are in: online smoothing, the answer at step
``t + L`` (dynamax's ``hmm_fixed_lag_smoother``). ``L = 0`` is filtering; ``L >= T - 1`` is
smoothing over the whole sequence (near the end the window stops at the last step).

The lag is a setting of the mode, in its name (``methods.grid.modes=[fixed_lag_1,fixed_lag_4]``),
not a dimension of the store: each lag is a value of the ``mode`` coordinate, so every
variable a mode fills (``tv`` over t, its largest ``tv_max``, the evidence, the runtimes and
speedup) serves each lag, and the stores of grids without the mode keep their dims and their
identity. A cell holds the approximate model's fixed-lag posteriors against the exact
model's, on ``filter``'s observations. Belief pruning has no counterpart (its cells are
NaN). The report's section shows, model by model, how each approximation fares at each lag.

``fixed_lag_smoothing`` is the algorithm: one forward pass keeps the filtered beliefs, then,
for each step ``t``, the backward recursion of smoothing runs over the window ``t..t + L``
from the window's end (``pipeline.inference.recursion``: the compiled step of any matrix
format, or transitions that change with time, ``transitions=``, as the other inference
functions take them); the windows that reach the last step share one backward pass.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference.inputs import read_evidence, read_initial
from pipeline.inference.recursion import recursion
from pipeline.inference.smoother import NO_PRUNING
from pipeline.kinds.methods.modes.base import (
    Disk,
    Exact,
    Mode,
    history_steps,
    nothing,
    posterior_measures,
    reading,
    timed_whole,
)
from pipeline.metrics import total_variation
from pipeline.results.schema import finite_median


class FixedLagResult(NamedTuple):
    """The result of ``fixed_lag_smoothing`` one sequence of T steps.

    posteriors : ndarray, shape (T, n_states)
        ``posteriors[t] = P(S_t | o_0..o_{min(t + lag, T - 1)})``.
    log_evidence : float
        ``log P(o_0..o_{T-1})``; ``-inf`` when some observation had zero probability.
    zero_evidence : ndarray of int
        The steps whose observation had zero probability: they count as unobserved in the
        forward and the backward recursion alike (``smoothing``'s convention).
    """

    posteriors: np.ndarray
    log_evidence: float
    zero_evidence: np.ndarray


def fixed_lag_smoothing(
    hmm: HMM,
    observations=None,
    *,
    lag: int,
    likelihoods=None,
    log_likelihoods=None,
    initial=None,
    transitions=None,
) -> FixedLagResult:
    """Fixed-lag smoothing: ``P(S_t | o_0..o_{t+lag})`` of every step of one sequence.

    ``hmm``, ``observations`` (T,), ``likelihoods``, ``log_likelihoods`` (T, n_states),
    ``initial`` (n_states,) and ``transitions`` as for ``pipeline.inference.smoothing``, one
    sequence; ``lag`` an integer >= 0. Memory: the filtered beliefs and the posteriors,
    (T, n_states) each, and a window of ``lag + 1`` beliefs.

    >>> from pipeline.models import build_model
    >>> hmm = build_model("weather", 6)
    >>> fixed_lag_smoothing(hmm, [0, -1, 1, 1, 0], lag=1).posteriors.shape
    (5, 6)
    """
    if isinstance(lag, bool) or not isinstance(lag, int | np.integer) or lag < 0:
        raise ValueError(f"lag must be an integer >= 0, got {lag!r}")
    evidence = read_evidence(hmm, observations, likelihoods, log_likelihoods)
    start = read_initial(hmm, initial)
    if evidence.rows.ndim != 1 or start.ndim != 1:
        raise ValueError("fixed_lag_smoothing takes one sequence and one initial distribution")
    rows, table = evidence.rows, evidence.likelihoods
    steps, n = rows.size, start.size
    run = recursion(hmm, transitions, steps)
    filtered, zero = np.empty((steps, n)), np.zeros(steps, dtype=bool)
    log_evidence = run.forward(
        start, table, rows, NO_PRUNING, filtered, np.empty(steps), zero, np.empty(steps),
        False, 0.0, 0,
    )  # fmt: skip
    log_evidence = float(log_evidence + evidence.offsets(zero))
    window = min(int(lag), steps - 1)
    posteriors, message, none = np.empty((steps, n)), np.empty(n), np.empty((0, n))
    part = np.empty((window + 1, n))
    last = steps - 1 - window  # the windows from here on end at the last step: one pass
    for t in range(last):
        stop = t + window + 1
        run.backward(table, rows[t:stop], zero[t:stop], filtered[t:stop], part, message,
                     True, none, t)  # fmt: skip
        posteriors[t] = part[0]
    run.backward(table, rows[last:], zero[last:], filtered[last:], posteriors[last:], message,
                 True, none, last)  # fmt: skip
    impossible = np.flatnonzero(zero) if log_evidence == -np.inf else np.empty(0, np.intp)
    return FixedLagResult(posteriors, log_evidence, impossible)


class FixedLag(Mode):
    """Fixed-lag smoothing at ``lag`` (None: the registered mode, which a grid names with
    its lag)."""

    registered = "fixed_lag"
    produces = frozenset({"tv", "tv_max", "log_evidence", "log_evidence_error", "zero_evidence"})
    unsupported = "belief pruning (topp_states), which fixed-lag smoothing does not do"
    line, line_name = (0, (5, 1)), "densely dashed"
    setting = "lag"

    def __init__(self, lag: int | None = None):
        self.lag = lag
        self.name = self.registered if lag is None else f"{self.registered}_{lag}"
        self.title = "fixed-lag smoothing" + ("" if lag is None else f" (lag {lag})")

    def at(self, setting: int) -> FixedLag:
        return FixedLag(setting)

    def _posteriors(self, hmm: HMM, observed: np.ndarray) -> FixedLagResult:
        assert self.lag is not None, "a grid names the mode with its lag"
        return fixed_lag_smoothing(hmm, observed, lag=self.lag)

    def reference(self, hmm: HMM, observed: np.ndarray, *, disk: Disk) -> Exact:
        """The exact fixed-lag posteriors, kept where they fit a history (else each cell
        computes them beside its approximation), and the log evidence."""
        found = self._posteriors(hmm, observed)
        fits = history_steps(observed.size, hmm.n_states) >= observed.size
        return Exact(found.posteriors if fits else None, found.log_evidence)

    def measures(self, hmm, approximation, exact, *, gamma, threads, disk):
        """TV between the exact and the approximate fixed-lag posteriors at every step, its
        largest value, the log evidence and its error, and the approximate run's
        zero-evidence steps."""
        observed = exact.observations
        steps = observed.size
        if not self.supports(approximation):
            return nothing(steps, log_evidence=exact.log_evidence)
        with threads():
            approx = self._posteriors(approximation.hmm, observed)

        def computed():
            found = self._posteriors(hmm, observed)
            return iter([(found.posteriors, found.log_evidence)])

        with reading(disk, exact, [(0, steps)], computed) as exacts:
            reference, log_evidence = next(exacts)
        tv = (
            np.full(steps, np.nan)
            if reference is None
            else total_variation(reference, approx.posteriors)
        )
        return posterior_measures(tv, log_evidence, approx.log_evidence, approx.zero_evidence.size)

    def run(self, hmm: HMM, observed: np.ndarray, prune: float) -> np.ndarray:
        return timed_whole(lambda: self._posteriors(hmm, observed), observed.size)

    def run_bytes(self, steps: int, n_states: int) -> int:
        """The filtered beliefs and the posteriors of every step, and a window."""
        window = min(self.lag if self.lag is not None else steps, steps)
        return (2 * steps + window + 2) * 8 * n_states

    def _lags(self, ds) -> list[FixedLag]:
        """The run's fixed-lag modes, by lag."""
        named = re.compile(rf"{self.registered}_(\d+)")
        found = [named.fullmatch(str(name)) for name in ds["mode"].values]
        return [FixedLag(lag) for lag in sorted(int(match[1]) for match in found if match)]

    def section(self, ds, kit):
        lags = self._lags(ds)
        header = ["model", "method", *(f"lag {mode.lag}" for mode in lags)]
        rows = []
        for where in kit.cells(ds):
            values = [_largest(ds, where, mode.name) for mode in lags]
            if any(np.isfinite(values)):
                rows.append(
                    [
                        f"{where['family']}, n={where['n_states']}",
                        kit.label(where["method"], where["setting"]),
                        *(f"{value:.3g}" if np.isfinite(value) else "-" for value in values),
                    ]
                )
        table = kit.markdown_table(header, rows) if rows else "No fixed-lag cell has a value."
        return ["## Fixed-lag smoothing", "", FIXED_LAG, "", table, ""]

    def figures(self, ds, kit):
        from matplotlib.figure import Figure  # drawn only by a report

        lags, pairs = self._lags(ds), kit.models(ds)
        x = [mode.lag for mode in lags]
        columns = min(COLUMNS, len(pairs))
        rows = -(-len(pairs) // columns)
        size = (max(6.0, 4.2 * columns), 3.4 * rows + 1.0)
        figure = Figure(figsize=size, layout="constrained")
        axes = figure.subplots(rows, columns, squeeze=False).ravel()
        for axis in axes[len(pairs) :]:
            axis.set_visible(False)
        figure.suptitle(
            "Fixed-lag smoothing: largest TV over steps between exact and approximate "
            "P(S_t | o_0..o_{t+L}), by lag L\nmarker: median over seeds"
        )
        for axis, (family, n) in zip(axes, pairs, strict=False):
            for (method, setting), style in kit.styles(ds).items():
                where = {"family": family, "n_states": n, "method": method, "setting": setting}
                if bool(ds["in_grid"].sel(where)):
                    y = [_largest(ds, where, mode.name) for mode in lags]
                    axis.plot(x, y, color=style["color"], marker=style["marker"])
            axis.set(xlabel="lag L", ylabel="largest TV over steps", title=f"{family}, n={n}")
            axis.set_xticks(x)
            kit.log_scale(axis, "y")
        kit.legend(figure, ds)
        return {"fixed_lag.png": figure}


COLUMNS = 4
"""Panels side by side at most in the figure: more models wrap into further rows."""

FIXED_LAG = (
    "Fixed-lag smoothing with the approximate model against exact fixed-lag smoothing, on the "
    "filtering runs' observations: the posterior of each step given L more observations, "
    "P(S_t | o_0..o_{t+L}), the answer an online smoother gives L steps late. Per lag, the "
    "largest TV over every step (medians over seeds), in [fixed_lag.png](fixed_lag.png). Lag 0 "
    "is filtering; a lag as long as the horizon is smoothing. '-': belief pruning (top-p "
    "states), which fixed-lag smoothing does not do, no exact reference, or no cell done."
)


def _largest(ds, where: dict, mode: str) -> float:
    """The median over the seeds of done cells of the largest TV over steps in ``mode``."""
    cell = ds.sel({**where, "mode": mode})
    return finite_median(cell["tv_max"].where(cell["done"]))


MODE = FixedLag()
