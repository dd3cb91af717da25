"""Every built-in sweep kind is one folder holding the files ``docs/development.md`` lists
("A sweep kind"), named once in ``pipeline.kinds.BUILTIN``, and its sweep has the interface
the engine calls."""

import dataclasses
import re

import pytest

from pipeline.kinds import BUILTIN
from pipeline.kinds.base import Schema

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


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_a_kind_is_one_folder_and_its_sweep_has_the_interface(name):
    folder = REPOSITORY / "pipeline" / "kinds" / name
    for file in listed_files():
        package = folder / file.removesuffix(".py") / "__init__.py"
        assert (folder / file).is_file() or package.is_file(), f"{name}: {file}"
    kind = BUILTIN[name]
    assert isinstance(kind.schema, Schema) and kind.schema.name == name
    assert kind.sweep == f"pipeline.kinds.{name}.sweep"
    assert kind.report == f"pipeline.kinds.{name}.report:analyze"
    assert callable(kind.load("report"))
    sweep = kind.load("sweep")
    assert sweep.SCHEMA is kind.schema and sweep.SECTION in (name, None)
    assert dataclasses.is_dataclass(sweep.CONFIG)
    assert sweep.CONFIG.__module__ == f"pipeline.kinds.{name}.config"
    for function in ("validate", "grid", "submit", "summary"):
        assert callable(getattr(sweep, function)), function
    assert sweep.grid.__module__ == f"pipeline.kinds.{name}.grid"
