"""What the Dask workers of a learning sweep run: a problem's exact-EM reference, once, and
each of its cells, EM with one approximate E-step against it (``pipeline.learning.compare``).

The generating model and the problem are made again from their seeds in each task (cheap);
the reference is the one result a cell reads from another task.
"""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM
from pipeline.kinds.learning.grid import LearningCell, ProblemKey, Settings
from pipeline.kinds.learning.results import LearningRecord
from pipeline.learning.compare import Comparison, Reference, compare, reference
from pipeline.learning.problem import Problem, draw
from pipeline.models import build_model
from pipeline.sweep.timing import Timing

ONE_THREAD = Timing(repeats=1, threads=1)
"""BLAS and numba fixed to one thread around every timed fit, so that its seconds do not
depend on what else the worker's machine runs (``Timing.fixed_threads``)."""


def _problem(key: ProblemKey, settings: Settings) -> tuple[HMM, Problem]:
    """The generating model of ``key`` and its data and start model."""
    truth = build_model(key.family, key.n_states, seed=key.seed)
    problem = draw(
        truth,
        sequences=key.sequences,
        length=key.length,
        held_out=settings.held_out,
        seed=key.seed,
        noise=settings.noise,
    )
    return truth, problem


def reference_task(key: ProblemKey, settings: Settings) -> Reference:
    """Exact EM on the problem of ``key``, warm, on one thread (``ONE_THREAD``)."""
    _, problem = _problem(key, settings)
    with ONE_THREAD.fixed_threads():
        return reference(
            problem,
            iterations=settings.iterations,
            tolerance=settings.tolerance,
            pseudocount=settings.pseudocount,
        )


def _series(comparison: Comparison) -> tuple[np.ndarray, ...]:
    return (
        comparison.training,
        comparison.held_out,
        comparison.e_step_seconds,
        comparison.m_step_seconds,
    )


def learning_cell(cell: LearningCell, exact: Reference, settings: Settings) -> LearningRecord:
    """EM whose E-step is the cell's method at its setting, against ``exact`` (the problem's
    ``reference_task``), from the same start on the same data."""
    truth, problem = _problem(cell.problem, settings)
    setting = int(cell.setting) if float(cell.setting).is_integer() else cell.setting
    with ONE_THREAD.fixed_threads():
        mine = compare(truth, problem, exact, cell.method, setting)
    ours = compare(truth, problem, exact)
    training, held_out, e_step, m_step = _series(mine)
    training_exact, held_out_exact, e_step_exact, m_step_exact = _series(ours)
    near, far = mine.to_reference, mine.to_truth
    return LearningRecord(
        training=training,
        held_out=held_out,
        e_step_seconds=e_step,
        m_step_seconds=m_step,
        training_exact=training_exact,
        held_out_exact=held_out_exact,
        e_step_seconds_exact=e_step_exact,
        m_step_seconds_exact=m_step_exact,
        iterations=mine.iterations,
        converged=mine.converged,
        to_reference_prior=near.prior,
        to_reference_transition_mean=near.transition_mean,
        to_reference_transition_max=near.transition_max,
        to_reference_emission_mean=near.emission_mean,
        to_reference_emission_max=near.emission_max,
        to_truth_prior=far.prior,
        to_truth_transition_mean=far.transition_mean,
        to_truth_transition_max=far.transition_max,
        to_truth_emission_mean=far.emission_mean,
        to_truth_emission_max=far.emission_max,
        held_out_gap=mine.held_out_gap,
    )
