"""A store's identity holds every setting that changes its values: a resume with another
value is refused in one line naming the key, never mixed into one store."""

import copy
import itertools

import pytest
from omegaconf import OmegaConf, open_dict

from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import SCHEMA
from pipeline.results.registry import BUILTIN
from pipeline.sweep.config import compose, register, validate
from pipeline.sweep.kind import installed
from pipeline.sweep.main import check_overrides
from pipeline.sweep.store import ResultStore

from helpers import corpus_folder
from sweeping import composed


@pytest.mark.parametrize(
    "override, difference",
    [
        ("methods.gamma_exact_max_states=2", "gamma_exact_max_states is 20000 in the store but 2"),
        ("methods.timing.enabled=false", "timing.enabled is True in the store but False"),
        ("methods.exact_max_states=30", "exact_max_states is None in the store but 30"),
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


EXPERIMENTS = {
    "methods": ["experiment=smoke"],
    "training": ["experiment=lm_smoke", "training.parameterisations=[softmax,kernel_4]"],
    "coupled": ["experiment=coupled_smoke"],
    "kernel_features": ["experiment=kernel_features"],
    "learning": ["experiment=learning_smoke"],
}
"""An experiment of each built-in kind, whose every key is perturbed in turn (the training
one without a banded kernel, whose states cannot be split: training.grow)."""


def test_every_built_in_kind_has_an_experiment_to_perturb():
    assert set(EXPERIMENTS) == set(BUILTIN)


OTHER_VALUES = {
    "methods.model.lm.corpus": ["/nonexistent/corpus.txt"],
    "methods.model.lm_smoothed.corpus": ["/nonexistent/corpus.txt"],
    "methods.model.file.path": ["/nonexistent/model.npz"],
    "methods.model.hmmlm.path": ["/nonexistent/model.npz"],
    "methods.grid.families": [["bell", "uniform"]],
    "methods.grid.modes": [["predict"]],
    "training.clustering": ["random", "exchange"],
    "training.clusters": [8, 2],
}
"""Other valid values of keys whose alternatives cannot be derived from their value."""


def leaves(container: dict, prefix: str = "") -> dict:
    """Every leaf of a nested mapping, by its dotted key."""
    found = {}
    for key, value in container.items():
        if isinstance(value, dict) and value:
            found.update(leaves(value, f"{prefix}{key}."))
        else:
            found[f"{prefix}{key}"] = value
    return found


def alternatives(key: str, value, others: dict) -> list:
    """Values of ``key`` other than ``value``, to try in turn until one is valid (``others``:
    those of the keys whose values cannot be derived, as ``OTHER_VALUES``)."""
    if key in others:
        return [v for v in others[key] if v != value]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, max(value - 1, 0)]
    if isinstance(value, float):
        return [value * 0.9, value * 1.1, value / 2]
    if isinstance(value, list) and len(value) > 1:
        return [value[:-1], value[1:]]
    if isinstance(value, list) and value and isinstance(value[0], int):
        return [[*value, value[0] + 1], [value[0] * 2]]
    if isinstance(value, list) and value and isinstance(value[0], float):
        return [[value[0] * 0.9], [*value, value[0] * 0.9]]
    if value is None:
        return [2, 0.5, True, "a"]
    return []


@pytest.mark.parametrize("kind", sorted(EXPERIMENTS))
def test_every_key_changes_the_identity_or_says_why_it_changes_no_value(kind, tmp_path):
    """Each leaf of a kind's config, changed to another valid value, changes the grid's
    identity, unless the grid's ``value_free()`` names it (or its section) with a reason; and
    no key so named changes the identity (another kind's section is null, and skipped)."""
    cfg = compose(EXPERIMENTS[kind])[0]
    with open_dict(cfg):
        cfg.pop("hydra", None)
    sweep = validate(cfg)
    grid = sweep.grid(cfg)
    free = grid.value_free()
    assert all(reason for reason in free.values())
    identity = grid.identity()
    words = " ".join(map("".join, itertools.product("bdfgklmnpt", "aeiou", "lmnrst")))
    others = OTHER_VALUES | {"training.corpus": [str(corpus_folder(tmp_path / "c", words))]}
    sections = {other.SECTION for other in installed().values()}  # plug-ins' too
    untried, errors = [], {}
    for key, value in leaves(OmegaConf.to_container(cfg, resolve=True)).items():
        if key == "kind" or value == {} or (value is None and key in sections):
            continue  # the kind itself, an empty section, another kind's section
        declared = any(key == k or key.startswith(f"{k}.") for k in free)
        for other in alternatives(key, value, others):
            changed = copy.deepcopy(cfg)
            try:
                OmegaConf.update(changed, key, other, merge=False)
                validate(changed)
                perturbed = sweep.grid(changed).identity()
            except Exception as error:  # not a valid value of this key: try the next
                errors[key] = f"{other!r}: {error}"
                continue
            assert (perturbed == identity) == declared, (key, value, other)
            break
        else:
            if not declared:
                untried.append(key)
    assert not untried, f"no valid other value of {untried} ({[errors.get(k) for k in untried]})"
