"""The learning report's numbers on a Dataset of real cells: tiny generating models, each
problem's exact-EM reference and its approximations run by ``compare``, labelled as the
sweep labels them, every answer held against a loop over the records by their own keys (so
a mislabelled cell is caught). A problem absent from the grid (the bell family has no
5-state model here, dirichlet no 6-state one) is all NaN and answers nothing."""

import itertools
import math

import numpy as np
import pytest
import xarray as xr

from pipeline.learning.compare import compare, reference
from pipeline.learning.problem import draw
from pipeline.learning.summary import (
    CELL,
    REFERENCE,
    divergence,
    elapsed,
    fastest_within,
    pareto,
)
from pipeline.models import build_model

SIZES = {"bell": 6, "dirichlet": 5}
SEEDS = [0, 1, 2]
RUNS = [("topk_transitions", 1), ("topk_transitions", 2), ("topp_transitions", 0.5)]
KEEPS_ALL = ("topk_transitions", 6)
"""k = n for the 6-state model, every entry for the 5-state one: exact EM's E-step."""
ITERATIONS = 5
COORDS = {
    "family": list(SIZES),
    "n_states": sorted(SIZES.values()),
    "seed": SEEDS,
    "sequences": [4],
    "length": [8],
    "method": ["topk_transitions", "topp_transitions"],
    "setting": [0.5, 1.0, 2.0, 6.0],
    "iteration": list(range(1, ITERATIONS + 1)),
}
SERIES = ("held_out", "e_step_seconds", "m_step_seconds")


def _empty(dims) -> np.ndarray:
    return np.full([len(COORDS[d]) for d in dims], np.nan)


@pytest.fixture(scope="module")
def grid():
    """(the Dataset, approximations' records by CELL key, exact records by REFERENCE key)."""
    cells, exact = {}, {}
    data = {name: _empty((*CELL, "iteration")) for name in SERIES}
    data |= {f"{name}_exact": _empty((*REFERENCE, "iteration")) for name in SERIES}
    for family, seed in itertools.product(SIZES, SEEDS):
        n = SIZES[family]
        truth = build_model(
            family, n, seed=seed, **({"alpha": 1.0} if family == "dirichlet" else {})
        )
        problem = draw(truth, sequences=4, length=8, held_out=3, seed=seed)
        ref = reference(problem, iterations=ITERATIONS, tolerance=1e-3)
        key = (family, n, seed, 4, 8)
        exact[key] = compare(truth, problem, ref)
        where = tuple(COORDS[d].index(v) for d, v in zip(REFERENCE, key, strict=True))
        for name in SERIES:
            data[f"{name}_exact"][where] = getattr(exact[key], name)
        for method, setting in [*RUNS, KEEPS_ALL]:
            cell = (*key, method, float(setting))
            cells[cell] = compare(truth, problem, ref, method, setting)
            where = tuple(COORDS[d].index(v) for d, v in zip(CELL, cell, strict=True))
            for name in SERIES:
                data[name][where] = getattr(cells[cell], name)
    dims = {name: (*(REFERENCE if name.endswith("_exact") else CELL), "iteration") for name in data}
    ds = xr.Dataset({name: (dims[name], values) for name, values in data.items()}, coords=COORDS)
    return ds, cells, exact


def _elapsed(record) -> np.ndarray:
    return np.cumsum(record.e_step_seconds + record.m_step_seconds)


def _filled(values: np.ndarray) -> np.ndarray:
    last = np.flatnonzero(~np.isnan(values))[-1]
    return np.where(np.arange(values.size) > last, values[last], values)


def test_elapsed_adds_each_iterations_steps(grid):
    ds, cells, exact = grid
    for cell, record in cells.items():
        np.testing.assert_array_equal(
            elapsed(ds).sel(dict(zip(CELL, cell, strict=True))), _elapsed(record)
        )
    for key, record in exact.items():
        found = elapsed(ds, "_exact").sel(dict(zip(REFERENCE, key, strict=True)))
        np.testing.assert_array_equal(found, _elapsed(record))


def test_the_fastest_approximation_within_one_percent_matches_a_loop_over_the_records(grid):
    ds, cells, exact = grid
    found = fastest_within(ds)
    answered = 0
    for family, n in SIZES.items():
        times, exact_times = {}, []
        for seed in SEEDS:
            key = (family, n, seed, 4, 8)
            best = np.nanmax(exact[key].held_out)
            band = best - 0.01 * abs(best)
            reached = exact[key].held_out >= band
            exact_times.append(_elapsed(exact[key])[np.argmax(reached)])
            for (*problem, method, setting), record in cells.items():
                if tuple(problem) == key:
                    hit = record.held_out >= band
                    first = _elapsed(record)[np.argmax(hit)] if hit.any() else math.inf
                    times.setdefault((method, setting), []).append(first)
        medians = {run: np.median(t) for run, t in times.items() if math.isfinite(max(t))}
        at = found.sel(family=family, n_states=n, sequences=4, length=8)
        assert float(at.exact_seconds) == pytest.approx(np.median(exact_times), rel=1e-12)
        if medians:
            answered += 1
            best = min(medians, key=medians.get)
            assert (str(at.method.values), float(at.setting)) == best
            assert float(at.seconds) == pytest.approx(medians[best], rel=1e-12)
            assert float(at.saved_seconds) == pytest.approx(
                np.median(exact_times) - medians[best], rel=1e-9
            )
        else:
            assert str(at.method.values) == "" and np.isnan(float(at.seconds))
    assert answered > 0  # at least one approximation matched exact EM somewhere
    absent = found.sel(family="bell", n_states=5, sequences=4, length=8)
    assert str(absent.method.values) == "" and np.isnan(float(absent.exact_seconds))


def test_a_method_s_pareto_front_is_its_undominated_points(grid):
    ds, _, _ = grid
    fronts = pareto(ds)
    for family, n in SIZES.items():
        for method in COORDS["method"]:
            at = fronts.sel(  # a dict: "method" is also sel's keyword
                {"family": family, "n_states": n, "sequences": 4, "length": 8, "method": method}
            )
            seconds, held = at.elapsed.values.ravel(), at.held_out.values.ravel()
            points = [(s, h) for s, h in zip(seconds, held, strict=True) if not np.isnan(s)]
            expected = [
                not np.isnan(s)
                and not any(t <= s and g >= h and (t < s or g > h) for t, g in points)
                for s, h in zip(seconds, held, strict=True)
            ]
            np.testing.assert_array_equal(at.on_front.values.ravel(), expected)
            assert at.on_front.values.any()  # the fastest point at least
    assert not fronts.on_front.sel(family="dirichlet", n_states=6).values.any()
    exact_curve = fronts.held_out_exact.sel(family="bell", n_states=6, sequences=4, length=8)
    assert np.isfinite(exact_curve.values).any()


def test_divergence_is_the_first_iteration_one_percent_below_exact_em(grid):
    ds, cells, exact = grid
    found = divergence(ds)
    diverged = 0
    for cell, record in cells.items():
        reference_curve = _filled(exact[cell[:5]].held_out)
        below = _filled(record.held_out) < reference_curve - 0.01 * np.abs(reference_curve)
        expected = float(np.argmax(below) + 1) if below.any() else math.inf
        assert float(found.sel(dict(zip(CELL, cell, strict=True)))) == expected
        diverged += below.any()
        if cell[5:] == (KEEPS_ALL[0], float(KEEPS_ALL[1])):
            assert expected == math.inf  # exact EM's E-step never leaves it
    assert np.isnan(found.sel(family="bell", n_states=5)).all()
    assert np.isnan(found.sel({"method": "topp_transitions", "setting": 1.0})).all()
    assert diverged > 0 or np.isinf(found.where(found.notnull(), drop=True)).all()
