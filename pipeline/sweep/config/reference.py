"""Every config key with its meaning, read from the schema that defines it, so the help and
the documentation cannot drift from the code.

A key's meaning is the docstring under its field in the schema's dataclass (the attribute
docstring convention Sphinx reads); its type and default are the field's. ``keys`` walks a
schema's nested dataclasses into dotted keys; ``experiments`` lists the experiment presets
with the first line of each file's comment, its summary.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import re
import textwrap
import typing
from pathlib import Path
from typing import NamedTuple


class Key(NamedTuple):
    """One config key: its dotted name, type, default and meaning (its field's docstring)."""

    name: str
    type: str
    default: str
    meaning: str


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of ``cls``'s fields: ``name`` -> the string literal right
    under its annotated assignment, dedented into one paragraph."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # made at run time (a family's parameters): none
        return {}
    body = tree.body[0].body
    found = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return found


def _type(hint) -> str:
    """A field's type as a reader writes it: ``int``, ``list[float]``, ``str | None``."""
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    text = str(hint).replace("typing.", "")
    text = re.sub(r"Optional\[(.*)\]", r"\1 | None", text)
    return text.replace("NoneType", "None")


def _default(field: dataclasses.Field) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def keys(schema: type, prefix: str = "") -> list[Key]:
    """Every key of the dataclass ``schema`` and of the dataclasses nested in it (as
    defaults or types), dotted (``grid.horizon``), in the order they are defined."""
    hints = typing.get_type_hints(schema)
    docs = {name: doc for cls in reversed(schema.__mro__) for name, doc in field_docs(cls).items()}
    found = []
    for field in dataclasses.fields(schema):
        name = f"{prefix}{field.name}"
        default = _default(field)
        nested = typing.get_args(hints[field.name]) or (hints[field.name],)
        inner = next((t for t in nested if dataclasses.is_dataclass(t)), None)
        if dataclasses.is_dataclass(default):
            inner = type(default)
        if inner is not None:
            found += keys(inner, f"{name}.")
            continue
        meaning = field.metadata.get("doc") or docs.get(field.name, "")
        rule = field.metadata.get("range")
        if rule is not None:
            meaning = f"{meaning} Allowed: {rule.allowed(hints[field.name])}.".strip()
        found.append(Key(name, _type(hints[field.name]), repr(default), meaning))
    return found


class Experiment(NamedTuple):
    """An experiment preset: its name (``experiment=<name>``) and its summary, the first line
    of its file's comment."""

    name: str
    summary: str


def experiments(folders: list[Path]) -> list[Experiment]:
    """The experiments of ``folders`` (each an ``experiment/`` folder of configs), by name;
    a name in a later folder replaces an earlier one's, as Hydra's search path does."""
    found = {}
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            comment = [
                line.lstrip("#").strip()
                for line in path.read_text().splitlines()
                if line.startswith("#") and "@package" not in line
            ]
            found[path.stem] = Experiment(path.stem, comment[0] if comment else "")
    return [found[name] for name in sorted(found)]
