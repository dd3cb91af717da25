"""A store's identity holds every setting that changes its values: a resume with another
value is refused in one line naming the key, never mixed into one store."""

import pytest

from pipeline.results.methods import SCHEMA
from pipeline.sweep.config import register
from pipeline.sweep.kinds.methods import MethodsGrid
from pipeline.sweep.main import check_overrides
from pipeline.sweep.store import ResultStore

from helpers import composed


@pytest.mark.parametrize(
    "override, difference",
    [
        ("gamma_exact_max_states=2", "gamma_exact_max_states is 20000 in the store but 2"),
        ("timing.enabled=false", "timing.enabled is True in the store but False"),
        ("exact_max_states=30", "exact_max_states is None in the store but 30"),
    ],
)
def test_a_resume_with_another_value_setting_is_refused_naming_it(override, difference, tmp_path):
    store = tmp_path / "results.zarr"
    ResultStore.open(store, SCHEMA, MethodsGrid.from_config(composed()), {})
    register()
    assert check_overrides(["experiment=smoke", f"store={store}"]) is None  # the same resumes
    problem = check_overrides(["experiment=smoke", f"store={store}", override])
    assert problem == (
        f"store: {store} holds a different sweep: {difference} in this run; choose another "
        "store= or pass overwrite=true to replace it"
    )
