import numpy as np
import pytest

from pipeline import tasks
from pipeline.metrics import doeblin_lower_bound, minimal_mixing_rate


@pytest.fixture(scope="module")
def model():
    return tasks.build("dirichlet", 60, 3, {"alpha": 0.2, "n_observations": None})


def cell(model, reference):
    """The top-0.8 prediction cell of ``model`` against ``reference``, two timed repeats."""
    return tasks.run_cell(
        model,
        tasks.approximate(model, 0.8),
        reference,
        tasks.mixing(model, True),
        0.8,
        "predict",
        repeats=2,
        min_seconds=0.0,
        max_repeats=5,
        threads=1,
    )


def test_gamma_from_parts_equals_one_search(model):
    whole = tasks.mixing(model, True)
    parts = [tasks.mixing_part(model, k, 3) for k in range(3)]
    combined = tasks.mixing(model, True, *parts)
    assert combined["gamma"] == whole["gamma"] == minimal_mixing_rate(model.hmm.transition)
    assert combined["gamma_exact"] == 1.0 and combined["gamma_time"] >= sum(s for _, s in parts)


def test_doeblin_stands_in_when_gamma_is_too_costly(model):
    fallback = tasks.mixing(model, False)
    assert fallback["gamma"] == fallback["doeblin"] == doeblin_lower_bound(model.hmm.transition)
    assert fallback["gamma_exact"] == 0.0


def test_a_cell_names_every_value_once(model):
    result = cell(model, tasks.reference(model, "predict", 8, 2, 0))
    values = result.values()
    assert set(values) == set(tasks.SERIES) | set(tasks.SCALARS)
    assert values["repeats"] == 2 and np.all(values["tv"] <= values["certificate"] + 1e-12)
    fused = tasks.run_model(
        "dirichlet",
        60,
        3,
        {"alpha": 0.2, "n_observations": None},
        [(0.8, "predict")],
        8,
        2,
        10**6,
        True,
        repeats=2,
        min_seconds=0.0,
        max_repeats=5,
        threads=1,
    )
    np.testing.assert_array_equal(fused[0].series[:3], result.series[:3])  # tv, bound, certificate


def test_without_an_exact_reference_only_top_p_is_timed(model):
    skipped = tasks.reference(model, "filter", 8, 2, 0, run=False)
    assert skipped.beliefs is None and np.isnan(skipped.log_evidence)
    np.testing.assert_array_equal(
        skipped.observations, tasks.reference(model, "filter", 8, 2, 0).observations
    )
    values = cell(model, tasks.reference(model, "predict", 8, 2, 0, run=False)).values()
    for name in ("tv", "runtime_dense", "runtime_dense_min"):
        assert np.isnan(values[name]).all(), name
    assert np.isnan(values["speedup"]) and values["repeats"] == 2
    assert np.isfinite(values["runtime_sparse"]).all() and np.isfinite(values["certificate"]).all()
