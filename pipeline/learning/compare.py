"""One cell of the learning sweep: EM with one approximate E-step against exact EM, from the
same start on the same data, and what the sweep stores of it.

``reference(problem, ...)`` runs exact EM once per problem (generating model, data and
start: ``pipeline.learning.problem.draw``); ``compare(truth, problem, reference,
approximation, setting)`` runs EM whose E-step smooths ``approximation``'s model of the
current parameters (``fit``) from the same start with the same ``Settings``, and returns a
``Comparison``: per iteration the training and held-out log-likelihood and the seconds of
the E- and M-step, whether it converged, its parameters' distances to exact EM's fit and to
the generating model, and its final held-out gap to exact EM. ``compare`` with no
approximation describes the reference itself, without fitting again.

**Warm.** A run's first E-step compiles the numba kernels its formats need (the forward and
backward steps, the counts, the approximation's row selection), which is not the method's
cost. Before the timed run, ``warm_up`` runs one untimed iteration of the same fit (the
same start model, approximation and formats) on a stand-in of its data, the first two
steps of the first training sequence: every kernel the timed run calls is compiled and the
model's pages are touched (the approximation is built from the whole model and the M-step
updates all of it), while the smoothing, the part whose cost grows with the data, is two
steps long. That is the house's rule (``pipeline.sweep.timing``: one untimed call of the same
code in the same process; work that cannot be called twice warms up on a stand-in, as a
training epoch does), at the cost of an iteration's fixed part rather than a whole one. The
sweep fixes BLAS's and numba's threads around the call (``Timing.fixed_threads``).

**Shipping the reference.** What ``compare`` reads of the reference is its fitted model and
its history: the dense fitted HMM, ``8 n (1 + n + m)`` bytes (n states, m symbols: 10 MB at
800 states, 64 MB at 2,000, 400 MB at 5,000), and four arrays of ``iterations`` floats.
The generating model and the problem are cheap to make again from their seeds in the
worker; the reference is the one thing a cell needs from another task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM
from pipeline.learning.fit import Fit, History, fit
from pipeline.learning.problem import Problem
from pipeline.metrics import total_variation
from pipeline.operators import rows

BLOCK_ENTRIES = 2**20
"""Rows are compared in blocks of about this many entries, so two dense n x n matrices never
need a third."""


class Settings(NamedTuple):
    """How every EM run of a problem goes, the reference's and its approximations' alike
    (``fit``'s arguments).

    iterations : int
        The most iterations a run takes.
    tolerance : float
        The training log-likelihood gain below which a run stops.
    pseudocount : float
        Added to the emission counts at every M-step.
    """

    iterations: int
    tolerance: float
    pseudocount: float


class Reference(NamedTuple):
    """Exact EM on a problem (``fit``: its model and ``History``), and the ``Settings`` every
    approximate run of the problem repeats."""

    fit: Fit
    settings: Settings


@dataclass(frozen=True)
class Distances:
    """How far a fitted model's parameters are from another model's, in total variation
    (``pipeline.metrics.total_variation``, in [0, 1]).

    prior : float
        TV of the two priors.
    transition_mean, transition_max : float
        The mean and the largest over states ``i`` of the TV of transition rows ``i``.
    emission_mean, emission_max : float
        The same over the emission rows.
    """

    prior: float
    transition_mean: float
    transition_max: float
    emission_mean: float
    emission_max: float


@dataclass(frozen=True)
class Comparison:
    """What the learning sweep stores of one cell. ``K`` is the reference's ``iterations``;
    entries after the last iteration a run made are NaN.

    training : ndarray, shape (K,)
        Training log-likelihood in nats per observed step, under the parameters iteration
        ``k`` started from, as its E-step computed it (under the approximation, if any).
    held_out : ndarray, shape (K,)
        Held-out log-likelihood in nats per observed step, exactly, under the model
        iteration ``k`` made; ``-inf`` where that model rules a held-out sequence out.
    e_step_seconds, m_step_seconds : ndarray, shape (K,)
        Wall time of iteration ``k``'s E-step (building the approximation from the current
        parameters, then smoothing) and M-step, warm (module docstring).
    iterations : int
        How many iterations the run made, at most ``K``.
    converged : bool
        Whether it stopped on the tolerance before running out of iterations.
    to_reference : Distances
        The fitted model against exact EM's fit (zero for the reference itself).
    to_truth : Distances
        The fitted model against the generating model.
    held_out_gap : float
        Exact EM's final held-out log-likelihood minus this run's, in nats per held-out
        observed step: positive where the approximation fits the held-out data worse; NaN
        where both are ``-inf``.
    """

    training: np.ndarray
    held_out: np.ndarray
    e_step_seconds: np.ndarray
    m_step_seconds: np.ndarray
    iterations: int
    converged: bool
    to_reference: Distances
    to_truth: Distances
    held_out_gap: float


def _tokens(observations: np.ndarray) -> int:
    """The observed steps of ``observations`` (symbols >= 0)."""
    return int(np.count_nonzero(observations >= 0))


def _row_distances(fitted, other) -> tuple[float, float]:
    """Mean and largest TV of corresponding rows of two matrices of one shape, any format."""
    n, m = fitted.shape
    block = max(1, BLOCK_ENTRIES // m)
    distances = np.concatenate(
        [
            total_variation(
                rows(fitted, start, min(start + block, n)),
                rows(other, start, min(start + block, n)),
            )
            for start in range(0, n, block)
        ]
    )
    return float(distances.mean()), float(distances.max())


def distances(fitted: HMM, other: HMM) -> Distances:
    """The ``Distances`` of ``fitted``'s parameters from ``other``'s (models of the same
    states and symbols, any matrix formats)."""
    if (fitted.n_states, fitted.n_observations) != (other.n_states, other.n_observations):
        raise ValueError(
            f"a fitted model of {fitted.n_states} states and {fitted.n_observations} symbols "
            f"cannot be compared with one of {other.n_states} and {other.n_observations}"
        )
    return Distances(
        float(total_variation(fitted.prior, other.prior)),
        *_row_distances(fitted.transition, other.transition),
        *_row_distances(fitted.emission, other.emission),
    )


def _gap(exact: float, approximate: float) -> float:
    """``exact - approximate``; NaN where both are ``-inf`` (each rules a sequence out)."""
    with np.errstate(invalid="ignore"):
        return float(exact - approximate)


def _padded(values: np.ndarray, size: int, scale: float = 1.0) -> np.ndarray:
    """``values / scale`` (k,), k <= size, followed by NaN to ``size`` entries."""
    padded = np.full(size, np.nan)
    padded[: values.size] = values / scale
    return padded


def warm_up(problem: Problem, approximation: str | None, setting, pseudocount: float) -> None:
    """One untimed iteration of the fit from ``problem.start`` by ``approximation`` at
    ``setting``, on the first two steps of the first training sequence (module docstring);
    it raises what ``fit`` would raise for the arguments, in one line."""
    fit(
        problem.start,
        problem.training[:1, :2],
        approximation=approximation,
        setting=setting,
        iterations=1,
        pseudocount=pseudocount,
    )


def _warm_fit(problem: Problem, approximation, setting, settings: Settings) -> Fit:
    """``fit`` from ``problem.start`` with ``settings``, after ``warm_up``."""
    warm_up(problem, approximation, setting, settings.pseudocount)
    return fit(
        problem.start,
        problem.training,
        approximation=approximation,
        setting=setting,
        held_out=problem.held_out,
        **settings._asdict(),
    )


def reference(
    problem: Problem, *, iterations: int, tolerance: float, pseudocount: float = 0.0
) -> Reference:
    """Exact EM on ``problem`` (warm), the reference of every approximation of it.

    ``iterations``, ``tolerance`` and ``pseudocount`` as ``fit`` takes them; ``ValueError``
    in one line for what ``fit`` refuses.
    """
    settings = Settings(iterations, tolerance, pseudocount)
    return Reference(_warm_fit(problem, None, None, settings), settings)


def compare(
    truth: HMM,
    problem: Problem,
    reference: Reference,
    approximation: str | None = None,
    setting=None,
) -> Comparison:
    """EM whose E-step is ``approximation`` at ``setting`` (a method of
    ``pipeline.methods.METHODS``), run as ``reference`` was, and compared with it; None
    describes the reference itself.

    Parameters
    ----------
    truth : HMM
        The model ``problem``'s sequences were drawn from, any matrix format.
    problem : Problem
        The data and the start, as ``reference`` was fitted on.
    reference : Reference
        Exact EM on ``problem`` (``reference(problem, ...)``).
    approximation : str, optional
        The E-step's method; the paper's ``topp`` and ``topk`` truncate the emissions, and
        ``fit`` refuses in one line a training sequence they rule out (``topp_transitions``
        and ``topk_transitions`` truncate the transitions alone).
    setting : number, optional
        The method's setting (``p``, ``k``, ``r``).

    >>> from pipeline.learning.problem import draw
    >>> from pipeline.models import build_model
    >>> truth = build_model("bell", 8)
    >>> problem = draw(truth, sequences=4, length=10, held_out=2, seed=0)
    >>> exact = reference(problem, iterations=5, tolerance=0.0, pseudocount=0.01)
    >>> compare(truth, problem, exact).to_reference.transition_max
    0.0
    >>> cell = compare(truth, problem, exact, "topk_transitions", 8)  # keeps every entry
    >>> bool(abs(cell.held_out_gap) < 1e-12 and cell.to_reference.transition_max < 1e-12)
    True
    >>> cell.held_out.shape, cell.iterations
    ((5,), 5)
    """
    fitted = reference.fit
    if approximation is not None or setting is not None:
        fitted = _warm_fit(problem, approximation, setting, reference.settings)
    history: History = fitted.history
    assert history.held_out is not None and reference.fit.history.held_out is not None
    size, held = int(reference.settings.iterations), _tokens(problem.held_out)
    return Comparison(
        training=_padded(history.log_likelihood, size, _tokens(problem.training)),
        held_out=_padded(history.held_out, size, held),
        e_step_seconds=_padded(history.e_step_seconds, size),
        m_step_seconds=_padded(history.m_step_seconds, size),
        iterations=int(history.log_likelihood.size),
        converged=bool(history.converged),
        to_reference=distances(fitted.hmm, reference.fit.hmm),
        to_truth=distances(fitted.hmm, truth),
        held_out_gap=_gap(reference.fit.history.held_out[-1], history.held_out[-1]) / held,
    )
