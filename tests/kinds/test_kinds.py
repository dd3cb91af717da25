"""Every built-in sweep kind is one folder holding the files ``docs/development.md`` lists
("A sweep kind"), named once in ``pipeline.results.registry.BUILTIN``, and passes the contract every
kind passes (``pipeline.testing.kinds``): its schema, its sweep's interface, the grid of an
experiment of it."""

import dataclasses
import re

import pytest

from pipeline.results.registry import BUILTIN, KINDS
from pipeline.results.schema import Record, Schema, Variable, status_variables
from pipeline.testing import check_kind

from helpers import REPOSITORY


def listed_files() -> list[str]:
    """The files of a kind as the development guide lists them."""
    text = (REPOSITORY / "docs" / "development.md").read_text()
    section = text.split("## A sweep kind\n")[1].split("\n## ")[0]
    return re.findall(r"^- `([\w.]+)`", section, flags=re.MULTILINE)


def test_the_guide_lists_a_kinds_files():
    assert listed_files() == [
        "__init__.py",
        "results.py",
        "config.py",
        "grid.py",
        "tasks.py",
        "sweep.py",
        "report.py",
    ]


def test_every_folder_of_the_kinds_is_a_registered_kind():
    folders = {
        entry.name
        for entry in (REPOSITORY / "pipeline" / "kinds").iterdir()
        if entry.is_dir() and (entry / "__init__.py").is_file()
    }
    assert folders == set(BUILTIN)


EXPERIMENTS = {
    "methods": "smoke",
    "training": "lm_smoke",
    "coupled": "coupled_smoke",
    "kernel_features": "kernel_features",
    "learning": "learning_smoke",
}
"""The experiment of each built-in kind whose grid the contract checks."""


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_a_kind_is_one_folder_and_passes_the_contract(name):
    folder = REPOSITORY / "pipeline" / "kinds" / name
    for file in listed_files():
        package = folder / file.removesuffix(".py") / "__init__.py"
        assert (folder / file).is_file() or package.is_file(), f"{name}: {file}"
    assert BUILTIN[name] == f"pipeline.kinds.{name}:KIND"
    kind = KINDS[name]
    assert kind.sweep == f"pipeline.kinds.{name}.sweep"
    assert kind.report == f"pipeline.kinds.{name}.report:analyze"
    check_kind(name, f"experiment={EXPERIMENTS[name]}")
    sweep = kind.load("sweep")
    assert sweep.CONFIG.__module__ == f"pipeline.kinds.{name}.config"
    assert sweep.grid.__module__ == f"pipeline.kinds.{name}.grid"


def test_the_contract_fails_for_a_kind_nothing_registers():
    with pytest.raises(AssertionError, match=r"^unknown sweep kind 'nope'; allowed: methods, "):
        check_kind("nope")


def test_a_schema_refuses_a_record_that_is_not_its_variables():
    @dataclasses.dataclass(frozen=True)
    class Short(Record):
        tv: float

    variables = {
        "tv": Variable(("n",), "1", "a TV"),
        "gamma": Variable(("n",), "1", "a gamma"),
        **status_variables(("n",)),
    }
    with pytest.raises(TypeError, match=r"record Short has the fields \[\] .* lacks \['gamma'\]"):
        Schema(name="short", dims=("n",), variables=variables, record=Short)
    schema = Schema(name="short", dims=("n",), variables={"tv": variables["tv"]}, record=Short)
    assert Short(0.5).values() == {"tv": 0.5} and schema.record is Short
