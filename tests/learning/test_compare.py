"""One learning cell: the record holds exactly what ``fit`` gives from the problem's start
(per observed step, padded after the last iteration), the distances are row-wise TV against
a dense loop, an E-step that keeps everything matches the reference, and what ``fit``
refuses is refused in one line."""

import numpy as np
import pytest
import scipy.sparse as sp

from pipeline.learning import fit
from pipeline.learning.compare import compare, distances, reference
from pipeline.learning.problem import draw
from pipeline.models import HMM, build_model
from pipeline.operators import toarray
from pipeline.testing.random_models import random_hmm

ITERATIONS = 6


@pytest.fixture(scope="module")
def cell():
    """A 7-state Bell model, its problem and its exact-EM reference."""
    truth = build_model("bell", 7, seed=2)
    problem = draw(truth, sequences=5, length=9, held_out=3, seed=4)
    exact = reference(problem, iterations=ITERATIONS, tolerance=0.0, pseudocount=0.01)
    return truth, problem, exact


def _dense_distances(fitted: HMM, other: HMM) -> list[float]:
    rows = {
        name: 0.5 * np.abs(toarray(getattr(fitted, name)) - toarray(getattr(other, name))).sum(1)
        for name in ("transition", "emission")
    }
    return [
        0.5 * np.abs(fitted.prior - other.prior).sum(),
        rows["transition"].mean(),
        rows["transition"].max(),
        rows["emission"].mean(),
        rows["emission"].max(),
    ]


def test_an_approximate_cell_records_its_fit_per_observed_step(cell):
    truth, problem, exact = cell
    found = compare(truth, problem, exact, "topk_transitions", 2)
    again = fit(
        problem.start,
        problem.training,
        approximation="topk_transitions",
        setting=2,
        iterations=ITERATIONS,
        tolerance=0.0,
        held_out=problem.held_out,
        pseudocount=0.01,
    )
    np.testing.assert_array_equal(found.training, again.history.log_likelihood / 45)
    np.testing.assert_array_equal(found.held_out, again.history.held_out / 27)
    assert found.iterations == ITERATIONS and not found.converged
    assert (found.e_step_seconds > 0).all() and (found.m_step_seconds > 0).all()
    np.testing.assert_allclose(
        list(vars(found.to_truth).values()), _dense_distances(again.hmm, truth), rtol=1e-12
    )
    np.testing.assert_allclose(
        list(vars(found.to_reference).values()),
        _dense_distances(again.hmm, exact.fit.hmm),
        rtol=1e-12,
    )
    assert found.to_reference.transition_max > 0
    gap = (exact.fit.history.held_out[-1] - again.history.held_out[-1]) / 27
    assert found.held_out_gap == pytest.approx(gap, rel=1e-12)


def test_the_reference_describes_itself_and_an_e_step_that_keeps_everything_matches_it(cell):
    truth, problem, exact = cell
    itself = compare(truth, problem, exact)
    assert itself.held_out_gap == 0 and itself.to_reference.transition_max == 0
    np.testing.assert_array_equal(itself.held_out, exact.fit.history.held_out / 27)
    everything = compare(truth, problem, exact, "topk_transitions", 7)
    np.testing.assert_allclose(everything.held_out, itself.held_out, rtol=1e-12)
    np.testing.assert_allclose(everything.training, itself.training, rtol=1e-12)
    assert everything.to_reference.transition_max < 1e-12
    assert everything.to_reference.emission_max < 1e-12
    assert abs(everything.held_out_gap) < 1e-12


def test_a_run_that_stops_early_is_padded_with_nan():
    truth = build_model("bell", 6, seed=0)
    problem = draw(truth, sequences=3, length=5, held_out=2, seed=1)
    stopped = compare(truth, problem, reference(problem, iterations=5, tolerance=np.inf))
    assert stopped.converged and stopped.iterations == 2
    for series in (stopped.training, stopped.held_out, stopped.e_step_seconds):
        assert series.shape == (5,)
        assert np.isfinite(series[:2]).all() and np.isnan(series[2:]).all()


def test_distances_read_rows_of_any_format_in_blocks(monkeypatch):
    from pipeline.learning import compare as module

    monkeypatch.setattr(module, "BLOCK_ENTRIES", 10)  # several blocks of two rows
    fitted, other = random_hmm(1, 6, 5, zeros=0.3), random_hmm(2, 6, 5, zeros=0.3)
    sparse = HMM(other.prior, sp.csr_array(other.transition), sp.csr_array(other.emission))
    np.testing.assert_allclose(
        list(vars(distances(fitted, sparse)).values()),
        _dense_distances(fitted, other),
        rtol=1e-12,
    )
    with pytest.raises(ValueError, match=r"^a fitted model of 6 states and 5 symbols cannot"):
        distances(fitted, random_hmm(3, 6, 4))


def test_what_fit_refuses_is_refused_in_one_line(cell):
    truth, problem, exact = cell
    near_truth = draw(truth, sequences=5, length=9, held_out=3, seed=4, noise=1e-6)
    with pytest.raises(
        ValueError, match=r"^observations\[\d\] has probability zero under the topp .*topp_"
    ) as error:
        compare(truth, near_truth, exact, "topp", 0.5)  # 2 of 7 symbols kept a state
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=r"^setting of topk: k must be an integer >= 1"):
        compare(truth, problem, exact, "topk", 0)
    with pytest.raises(ValueError, match=r"^iterations must be an integer >= 1, got 2\.5"):
        reference(problem, iterations=2.5, tolerance=0.0)
