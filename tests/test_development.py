"""``docs/development.md``, the house tour, against the code: its layers are ``LAYERS`` in
order and tour every package and module of ``pipeline``, every file it names exists, and
the example plug-in registers what it says."""

import re
import tomllib

from test_layers import LAYERS, PACKAGE

from helpers import REPOSITORY

TOUR = (REPOSITORY / "docs" / "development.md").read_text()


def _section(title: str) -> str:
    return TOUR.split(f"\n## {title}\n")[1].split("\n## ")[0]


def test_the_layers_are_the_layers_the_imports_keep_lowest_first():
    items = re.findall(r"^\d+\. ((?:`\w+`(?:, )?)+):", _section("The layers"), flags=re.M)
    assert [tuple(re.findall(r"`(\w+)`", item)) for item in items] == list(LAYERS)


def test_every_package_and_module_of_the_pipeline_is_toured():
    found = {
        path.stem if path.is_file() else path.name
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert found == {name for names in LAYERS for name in names}


def _exists(path: str) -> bool:
    """Whether ``path`` exists; a path with a placeholder, the folder before it."""
    if "<" in path:
        path = path[: path.index("<")].rpartition("/")[0]
    return (REPOSITORY / path).exists()


def test_every_file_the_tour_names_exists():
    named = set(re.findall(r"`((?:pipeline|tests|conf|docs|examples)/[^`\s]*)`", TOUR))
    assert len(named) > 20
    assert [path for path in sorted(named) if not _exists(path)] == []


def test_every_table_the_tour_names_is_in_its_file():
    """``BUILTIN`` of ``pipeline/methods/__init__.py``: the file assigns (or defines) that name."""
    named = re.findall(r"`(\w+)`\s+of\s+`([\w/.]+\.py)`", TOUR)
    assert len(named) >= 8
    for name, path in named:
        text = (REPOSITORY / path).read_text()
        assert re.search(rf"^(class {name}\b|{name}\b.*=)", text, flags=re.M), (name, path)


def test_the_example_registers_what_the_tour_says():
    project = tomllib.loads((REPOSITORY / "examples/pipeline-ring/pyproject.toml").read_text())
    registered = {
        (group, name)
        for group, entries in project["project"]["entry-points"].items()
        for name in entries
    }
    paragraph = _section("What to touch to add one").strip().split("\n\n")[0]
    said = {(group, name) for name, group in re.findall(r"`(\w+)`\s+\(`([\w.]+)`\)", paragraph)}
    assert said == registered
