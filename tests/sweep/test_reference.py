"""The configuration reference is read from the code: every key of every kind, family and
cluster back-end has a meaning, a default and the values it allows; a family's parameters
are read from its ``build`` docstring; every cluster entry and experiment has a summary."""

import importlib.util

import pytest

from pipeline.models import BUILTIN as BUILTIN_FAMILIES
from pipeline.models import family_parameters
from pipeline.sweep.backends import BACKENDS
from pipeline.sweep.config.reference import cluster_entries, experiments, keys, parameter_docs
from pipeline.sweep.config.schema import (
    CONFIG_DIR,
    SHIPPED_CLUSTERS,
    group_defaults,
    sweep_config,
)

from helpers import REPOSITORY


def _every_key():
    found = keys(sweep_config(), chosen=group_defaults())
    for backend in BACKENDS.values():
        found += keys(backend.schema, f"cluster[{backend.kind}].")
    return found


@pytest.mark.parametrize("key", _every_key(), ids=lambda key: key.name)
def test_every_key_has_a_meaning_a_default_and_what_it_allows(key):
    assert len(key.meaning) > 10, key
    assert key.allowed and key.default != repr("???"), key


def test_every_kind_family_and_back_end_is_in_the_reference():
    names = {key.name for key in _every_key()}
    for family in BUILTIN_FAMILIES:
        assert {f"methods.model.{family}.{p}" for p in family_parameters(family)} <= names, family
    for section in ("methods", "training", "coupled", "kernel_features", "learning"):
        assert any(name.startswith(f"{section}.") for name in names), section
    for kind in BACKENDS:
        assert f"cluster[{kind}].wait_for_workers" in names, kind


def test_the_cluster_group_shows_the_entry_hydra_picks_by_default():
    found = {key.name: key for key in keys(sweep_config(), chosen=group_defaults())}
    assert found["cluster"].default == "'local'"
    assert "machine" in found["cluster"].allowed and "address" in found["cluster"].allowed


def _documented(*, speed: float = 1.0, mass: float = 0.5, width: int = 2, flag: bool = False):
    """A function documented as a family's ``build`` is. ``flag`` turns the thing around.

    Parameters
    ----------
    speed : float > 0
        How fast,
        in two lines.
    mass, width
        Shared by two.

    Not a parameter : str
        A paragraph after the section.
    """


def test_a_parameters_meaning_and_bounds_come_from_its_docstring():
    found = parameter_docs(_documented)
    assert found["speed"] == {"doc": "How fast, in two lines.", "allowed": "numbers > 0"}
    assert found["mass"] == found["width"] == {"doc": "Shared by two."}
    assert found["flag"] == {"doc": "``flag`` turns the thing around."}  # named in the prose
    assert "Not a parameter" not in found


def test_a_family_documented_as_another_reads_the_others_meaning():
    found = {key.name: key.meaning for key in keys(sweep_config())}
    banded, kernel = "methods.model.banded_kernel", "methods.model.kernel"
    assert found[f"{banded}.temperature"] == found[f"{kernel}.temperature"]
    assert "As in" not in found[f"{banded}.dim"]


def test_every_shipped_cluster_entry_and_experiment_has_a_summary_and_a_section():
    spec = importlib.util.spec_from_file_location(
        "reference_pages", REPOSITORY / "docs" / "reference_pages.py"
    )
    pages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pages)
    page = pages.config_page()
    entries = cluster_entries(SHIPPED_CLUSTERS)
    assert {entry.name for entry in entries} >= {"local", "machine", "address", "ssh"}
    for entry in entries:
        assert entry.summary.endswith("."), entry
        assert f"### cluster={entry.name}\n" in page
    machine = next(entry for entry in entries if entry.name == "machine")
    assert machine.values["cluster.n_workers"] == 1
    assert "| `cluster.n_workers` | `1` |" in page.split("### cluster=machine")[1]
    for experiment in experiments([CONFIG_DIR / "experiment"]):
        assert experiment.summary.endswith("."), experiment
        assert len(experiment.summary) < 150, experiment  # a summary, not the whole comment
