"""The plan and its tasks, run in this process (the cluster runs are in test_sweep)."""

import pickle
import tempfile
import tracemalloc
from pathlib import Path

import dask
import numpy as np
import pytest
from inference import brute_force

from pipeline.inference import filtering
from pipeline.kinds.methods import plan, records, spilled, tasks, timed
from pipeline.kinds.methods.grid import Cell, MethodsGrid
from pipeline.kinds.methods.modes import base
from pipeline.kinds.methods.results import VARIABLES, MethodsRecord
from pipeline.kinds.methods.sweep import plan_settings
from pipeline.methods import approximate
from pipeline.metrics import doeblin_lower_bound, minimal_mixing_rate, total_variation
from pipeline.operators import toarray
from pipeline.results.schema import status_variables
from pipeline.sweep.timing import Timing

from sweeping import composed

SPEC = records.ModelSpec("dirichlet", 60, 3, {"alpha": 0.2, "n_observations": None})
TIMING = Timing(repeats=2, min_seconds=0.0, max_repeats=5, threads=1)
SETTINGS = plan.Settings(
    horizon=8,
    observe_every=2,
    timing=TIMING,
    gamma_exact_max_states=10**6,
    exact_max_states=None,
    token="t",
)
CELLS = [
    Cell("dirichlet", 60, method, setting, 3, mode)
    for method, setting in (("topp", 0.8), ("topk", 4.0), ("topp_states", 0.9))
    for mode in ("predict", "filter")
]


@pytest.fixture(scope="module")
def model():
    return tasks.build(SPEC)


def measured(model, built, exact, mixed, *, mode, timing=TIMING, **given):
    """One cell as its plan computes it: its approximation timed in rounds with the exact
    run (alone here), then measured."""
    which = ("method", 0.0)
    runs = timed.timed_runs(model, exact, built, which=(which,), mode=mode, timing=timing)
    return tasks.run_cell(
        model, built, exact, mixed, runs, which=which, mode=mode, timing=timing, **given
    )


def test_gamma_from_parts_equals_one_search(model):
    whole = tasks.mixing(model, exact=True)
    parts = [tasks.mixing_part(model, part=k, parts=3) for k in range(3)]
    combined = tasks.mixing(model, *parts, exact=True)
    assert combined.gamma == whole.gamma == minimal_mixing_rate(model.hmm.transition)
    assert combined.exact and combined.doeblin <= combined.gamma


def test_doeblin_stands_in_when_gamma_is_too_costly(model):
    fallback = tasks.mixing(model, exact=False)
    assert fallback.gamma == fallback.doeblin == doeblin_lower_bound(model.hmm.transition)
    assert not fallback.exact


def test_the_plan_shares_work_and_names_it(model):
    graph = dict(dask.delayed(list(plan.model_plan(SPEC, CELLS, SETTINGS).values())).dask)
    names = [str(key).split("-")[0] for key in graph]
    parts = [key for key in graph if str(key).startswith("gamma-part")]
    assert names.count("model") == 1 and names.count("gamma") == 1 + len(parts)
    assert len(parts) == plan.gamma_parts(SPEC.n_states)
    assert names.count("exact") == 2 and names.count("approximate") == 3
    assert names.count("timing") == 2  # one per mode and seed, shared by its cells
    assert names.count("cell") == len(CELLS)
    assert all(str(key).endswith("-t") for key in graph if not str(key).startswith("list"))


def test_the_plan_in_process_gives_each_cell_its_own_result(model):
    """Each result must be its cell's: recompute TV from the library for every cell."""
    results = plan.run_model(SPEC, CELLS, SETTINGS)
    for cell, result in zip(CELLS, results, strict=True):
        values = result
        assert values.repeats == 2
        _, observed = tasks.observations(
            model.hmm, mode=cell.mode, horizon=8, observe_every=2, seed=3
        )
        approximation = approximate(model.hmm, cell.method, cell.setting)
        exact = filtering(model.hmm, observed).beliefs
        approximate_run = filtering(approximation.hmm, observed, prune=approximation.prune)
        np.testing.assert_array_equal(
            values.tv, total_variation(exact, approximate_run.beliefs), err_msg=str(cell)
        )
        if cell.mode == "filter":
            assert np.isnan(values.certificate).all()
        else:
            assert (values.tv <= values.certificate + 1e-12).all()
    # one exact reference timed per mode and seed: the same exact runs in all its cells
    for mode in ("predict", "filter"):
        runs = [r.runtime_exact for c, r in zip(CELLS, results, strict=True) if c.mode == mode]
        assert all(np.array_equal(runs[0], other) for other in runs[1:]), mode


def test_without_an_exact_reference_only_the_approximation_is_timed(model):
    skipped = tasks.reference(model, mode="filter", horizon=8, observe_every=2, seed=0, run=False)
    ran = tasks.reference(model, mode="filter", horizon=8, observe_every=2, seed=0, run=True)
    assert skipped.beliefs is None and np.isnan(skipped.log_evidence)
    np.testing.assert_array_equal(skipped.observations, ran.observations)
    built = tasks.build_approximation(model, method="topp", setting=0.8)
    predicted = tasks.reference(
        model, mode="predict", horizon=8, observe_every=2, seed=0, run=False
    )
    mixed = tasks.mixing(model, exact=True)
    values = measured(model, built, predicted, mixed, mode="predict")
    for name in ("tv", "runtime_exact", "runtime_exact_min"):
        assert np.isnan(getattr(values, name)).all(), name
    assert np.isnan(values.speedup) and values.repeats == 2
    assert np.isfinite(values.runtime_approx).all() and np.isfinite(values.certificate).all()


def test_one_model_serves_every_seed_of_a_family_that_ignores_it():
    cells = [Cell("uniform", 30, "topp", 0.9, seed, "filter") for seed in (0, 1, 2)]
    groups = plan.by_model(MethodsGrid.from_config(composed()), cells)
    assert [(spec.seed, len(group)) for spec, group in groups] == [(0, 3)]
    spec, group = groups[0]
    graph = dict(dask.delayed(list(plan.model_plan(spec, group, SETTINGS).values())).dask)
    names = [str(key).split("-")[0] for key in graph]
    assert names.count("model") == 1 and names.count("exact") == 3  # one reference per seed
    seeded_cells = [Cell("bell", 30, "topp", 0.9, seed, "filter") for seed in (0, 1)]
    assert len(plan.by_model(MethodsGrid.from_config(composed()), seeded_cells)) == 2


def test_impossible_observations_are_those_the_approximate_emissions_drop(model):
    """Recount, from the sampled states, the observations top-p's emissions rule out."""
    exact = tasks.reference(model, mode="filter", horizon=40, observe_every=1, seed=5, run=True)
    built = tasks.build_approximation(model, method="topp", setting=0.5)
    mixed = tasks.mixing(model, exact=True)
    values = measured(model, built, exact, mixed, mode="filter")
    E = toarray(built.approximation.hmm.emission)
    expected = np.mean(E[exact.states, exact.observations] == 0)
    assert 0 < expected < 1 and values.impossible_observations == pytest.approx(expected)
    predicted = tasks.reference(model, mode="predict", horizon=8, observe_every=2, seed=0, run=True)
    values = measured(model, built, predicted, mixed, mode="predict")
    assert np.isnan(values.impossible_observations)


@pytest.mark.parametrize(
    ("method", "setting", "mode"),
    [("topp", 0.8, "filter"), ("topp_states", 0.9, "predict"), ("topk", 4.0, "smooth")],
)
def test_a_cell_in_chunks_measures_what_a_whole_history_does(
    model, monkeypatch, method, setting, mode
):
    """Where a history does not fit ``HISTORY_BYTES`` the reference writes it to disk and
    each cell reads it a few steps at a time; where it cannot read the file (another machine,
    or no file), the cell runs exact and approximate inference in lockstep: the same values.
    Smoothing's segments come latest first and are written where they belong."""
    built = tasks.build_approximation(model, method=method, setting=setting)
    mixed = tasks.mixing(model, exact=True)
    whole = tasks.reference(model, mode=mode, horizon=30, observe_every=2, seed=3, run=True)
    expected = measured(model, built, whole, mixed, mode=mode)
    monkeypatch.setattr(base, "HISTORY_BYTES", 8 * model.hmm.n_states * 4)  # 4 steps
    chunked = tasks.reference(model, mode=mode, horizon=30, observe_every=2, seed=3, run=True)
    history = chunked.beliefs
    assert isinstance(history, spilled.SpilledHistory) and history.shape == whole.beliefs.shape
    with history.reader() as reader:
        np.testing.assert_array_equal(reader.rows(0, 31), whole.beliefs)
    assert chunked.log_evidence == whole.log_evidence or mode == "predict"
    elsewhere = spilled.SpilledHistory(history.path, history.shape, "another-machine")
    for exact in (chunked, chunked._replace(beliefs=elsewhere), chunked._replace(beliefs=None)):
        values = measured(model, built, exact, mixed, mode=mode)
        for name in ("tv", "work", "log_evidence", "log_evidence_error", "zero_evidence", "eps"):
            np.testing.assert_array_equal(
                getattr(values, name), getattr(expected, name), err_msg=name
            )
        # a step's error is a matrix-vector product over the chunk's rows: BLAS may round it
        # differently for other row counts
        np.testing.assert_allclose(values.certificate, expected.certificate, rtol=1e-13)
        timed = values.runtime_exact[-1:] if mode == "smooth" else values.runtime_exact
        assert values.runtime_exact.shape == (31,) and np.isfinite(timed).all()
    path = Path(history.path)
    assert path.stat().st_size == whole.beliefs.nbytes
    copy = pickle.loads(pickle.dumps(history))  # as sent to another worker
    assert (copy.path, copy.shape) == (history.path, history.shape)
    del copy
    assert path.exists()  # a copy never removes the file
    del chunked, history, exact
    assert not path.exists()  # removed with the reference that wrote it


def test_a_history_that_cannot_be_written_whole_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for rows in (4096, 1):  # past the write buffer, the write fails; within it, the close
        spill = spilled.Spill((rows, 2))
        spill.file.close()
        spill.file = open("/dev/full", "wb")  # a full disk (Spill closes it)
        assert spill.write(np.ones((rows, 2))) is (rows == 1)
        assert spill.close() is None and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    spill = spilled.Spill((3, 2))  # a directory it cannot write to
    assert not spill.write(np.ones((3, 2))) and spill.close() is None
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spill = spilled.Spill((3, 2))
    assert spill.write(np.ones((3, 2)))
    history = spill.close()
    with history.reader() as reader:
        assert reader.rows(1, 3).tolist() == [[1.0, 1.0]] * 2
    Path(history.path).write_bytes(b"short")
    with history.reader() as reader:
        assert reader is None  # not the size of the history: not read


def test_a_cells_memory_does_not_grow_with_the_horizon(monkeypatch):
    n = 20_000
    hmm_model = tasks.build(records.ModelSpec("peaked", n, 0, {"structured": True}))
    built = tasks.build_approximation(hmm_model, method="topp", setting=0.9)
    mixed = tasks.mixing(hmm_model, exact=False)
    monkeypatch.setattr(base, "HISTORY_BYTES", 8 * n * 4)  # 4 steps: 0.64 MB a run
    peaks = []
    for horizon in (20, 160):
        exact = tasks.reference(
            hmm_model, mode="predict", horizon=horizon, observe_every=1, seed=0, run=True
        )
        tracemalloc.start()
        measured(hmm_model, built, exact, mixed, mode="predict")
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    # a whole history would take 8x the memory at 160 steps (0.16 MB a step for each run)
    assert peaks[1] < 1.3 * peaks[0], peaks


def test_a_cell_returns_every_variable_of_the_schema_by_name():
    """``run_cell`` returns the schema's record, which holds exactly the methods schema's
    variables, cell status aside (a record that does not cannot be made a schema's)."""
    cfg = composed("grid.families=[bell]", "grid.n_states=[20]", "grid.seeds=[0]")
    grid = MethodsGrid.from_config(cfg)
    ((spec, cells),) = plan.by_model(grid, grid.cells())
    results = plan.run_model(spec, cells, plan_settings(grid))
    status = set(status_variables(()))
    assert all(isinstance(result, MethodsRecord) for result in results)
    assert all(set(result.values()) == set(VARIABLES) - status for result in results)


TINY_SPEC = records.ModelSpec("dirichlet", 3, 0, {"alpha": 0.5, "n_observations": 3})
"""3 states, 3 symbols: 3^7 paths over 7 steps, few enough to enumerate."""


@pytest.mark.parametrize(("method", "setting"), [("topp", 0.6), ("topk", 2.0), ("lowrank", 1.0)])
def test_smooth_and_decode_cells_against_every_path(method, setting):
    """Every stored number of a smooth and a decode cell from the enumeration of every state
    path of the exact and the approximate model, on filter's observations (these cases have
    no observation the approximation makes impossible: such a step counts as unobserved)."""
    model = tasks.build(TINY_SPEC)
    built = tasks.build_approximation(model, method=method, setting=setting)
    mixed = tasks.mixing(model, exact=True)
    references = {
        mode: tasks.reference(model, mode=mode, horizon=6, observe_every=1, seed=0, run=True)
        for mode in ("filter", "smooth", "decode")
    }
    observed = references["filter"].observations
    for reference in references.values():
        np.testing.assert_array_equal(reference.observations, observed)
    smooth, decode = (
        measured(model, built, references[mode], mixed, mode=mode) for mode in ("smooth", "decode")
    )
    assert smooth.zero_evidence == decode.zero_evidence == 0

    def enumerated(hmm):
        logs = brute_force.symbol_log_likelihoods(toarray(hmm.emission), observed)
        posteriors, evidence, _ = brute_force.smoothing(hmm.prior, toarray(hmm.transition), logs)
        path, _ = brute_force.viterbi(hmm.prior, toarray(hmm.transition), logs)
        return logs, posteriors, evidence, path

    logs, posteriors, evidence, path = enumerated(model.hmm)
    _, approximate_posteriors, approximate_evidence, approximate_path = enumerated(
        built.approximation.hmm
    )
    tv = total_variation(posteriors, approximate_posteriors)
    np.testing.assert_allclose(smooth.tv, tv, rtol=0, atol=1e-12)
    assert smooth.tv_max == pytest.approx(tv.max(), abs=1e-12) and tv.max() > 0.01
    assert smooth.log_evidence == pytest.approx(evidence, rel=1e-12)
    assert smooth.log_evidence_error == pytest.approx(approximate_evidence - evidence, abs=1e-10)
    every, weights = brute_force.paths(model.hmm.prior, toarray(model.hmm.transition), logs)
    weight = dict(zip(map(tuple, every), weights, strict=True))
    differ = path != approximate_path
    assert decode.path_disagreement == differ.mean()
    assert decode.paths_equal == float(not differ.any())
    gap = weight[tuple(path)] - weight[tuple(approximate_path)]
    assert decode.log_probability_gap == pytest.approx(gap, abs=1e-10)
    assert decode.log_probability_gap >= -1e-12
    assert differ.any() == (method != "topk")  # topk 2 keeps the path, the others do not


NOT_PRODUCED = {
    "predict": {"tv_max", "log_evidence", "log_evidence_error", "impossible_observations"},
    "filter": {"tv_max", "certificate"},
    "smooth": {"certificate", "work"},
    "decode": {"tv", "tv_max", "certificate", "work", "log_evidence", "log_evidence_error"},
}
"""What each mode does not produce, besides the measures of the other modes' own."""
DECODED = {"path_disagreement", "log_probability_gap", "paths_equal"}


def _all_nan(record) -> set[str]:
    return {
        name for name, value in record.values().items() if np.isnan(np.asarray(value, float)).all()
    }


def test_what_a_mode_does_not_produce_is_nan_and_its_missing_attribute_says_so(model):
    """In every mode, the variables NaN in a cell with an exact reference are exactly those
    the mode does not produce, each named by its ``missing`` attribute; belief pruning has no
    smoothing or Viterbi run, and the variables it leaves NaN name it."""
    built = tasks.build_approximation(model, method="topp", setting=0.8)
    pruned = tasks.build_approximation(model, method="topp_states", setting=0.9)
    mixed = tasks.mixing(model, exact=True)
    for mode in NOT_PRODUCED:
        exact = tasks.reference(model, mode=mode, horizon=8, observe_every=2, seed=3, run=True)
        values = measured(model, built, exact, mixed, mode=mode, estimate=1.0)
        expected = NOT_PRODUCED[mode] | (set() if mode == "decode" else DECODED)
        assert _all_nan(values) == expected, mode
        for name in expected:
            missing = VARIABLES[name].missing
            assert mode in missing or "NaN outside" in missing, (mode, name, missing)
        if mode not in ("smooth", "decode"):
            continue
        assert values.repeats == 2 and np.isfinite(values.speedup)
        assert np.isnan(values.runtime_approx[:-1]).all()  # a whole run's time: at the end
        unrun = measured(model, pruned, exact, mixed, mode=mode, estimate=1.0)
        assert unrun.repeats == 0
        for name in _all_nan(unrun) - _all_nan(values):
            assert "topp_states" in VARIABLES[name].missing, (mode, name)
        assert {"tv", "zero_evidence", "speedup", "runtime_approx"} <= _all_nan(unrun)
