"""Every config key with its meaning, read from the schema that defines it, so the help and
the documentation cannot drift from the code.

A key's meaning is the docstring under its field in the schema's dataclass (the attribute
docstring convention Sphinx reads), or its ``doc`` metadata for a field made at run time (a
family's parameters: ``parameter_docs`` reads them from its ``build`` docstring); its type
and default are the field's, and what it allows is declared on it (``ranged``, ``choices``)
or follows from its type. ``keys`` walks a schema's nested dataclasses into dotted keys;
``experiments`` lists the experiment presets with the first paragraph of each file's
comment, its summary; ``cluster_entries`` the entries of a ``dask_cluster.yaml`` likewise.
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

import yaml
from omegaconf import MISSING


class Key(NamedTuple):
    """One config key: its dotted name, type, default, meaning (its field's docstring) and
    the values it allows."""

    name: str
    type: str
    default: str
    meaning: str
    allowed: str


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of ``cls``'s fields: ``name`` -> the string literal right
    under its annotated assignment, dedented into one paragraph."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # made at run time (a family's parameters): none
        return {}
    definition = tree.body[0]
    assert isinstance(definition, ast.ClassDef), "the source of a class"
    body = definition.body
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


def parameter_docs(function) -> dict[str, dict[str, str]]:
    """The schema field metadata of ``function``'s parameters, read from its docstring:
    ``doc``, a parameter's meaning, from its numpydoc ``Parameters`` entry (names listed
    together, ``a, b``, share one), else the docstring's sentences that name it
    (````name````); and ``allowed`` where the entry's type bounds its values more than
    the annotation does (``float in [0, 1)``, ``float > 0``)."""
    text = inspect.cleandoc(function.__doc__ or "")
    lines = text.splitlines()
    header = next(
        (
            at
            for at, (line, rule) in enumerate(itertools.pairwise(lines))
            if line.strip() == "Parameters" and set(rule.strip()) == {"-"}
        ),
        None,
    )
    section = [] if header is None else list(itertools.takewhile(str.strip, lines[header + 2 :]))
    found = {}
    names: list[str] = []
    spec, meaning = "", []
    for line in [*section, ""]:  # an entry's head, then its indented meaning
        if line[:1].isspace():
            meaning.append(line.strip())
            continue
        for name in names:
            found[name] = {"doc": " ".join(meaning), **_bounds(spec)}
        head, _, spec = line.partition(" : ")
        names, meaning = [name.strip() for name in head.split(",") if name.strip()], []
    for name in inspect.signature(function).parameters:
        if name not in found:
            named = [s for s in _sentences(text) if f"``{name}``" in s]
            found[name] = {"doc": " ".join(named)}
    return found


def _sentences(text: str) -> list[str]:
    """The sentences of ``text``'s paragraphs, each on one line."""
    paragraphs = (" ".join(p.split()) for p in text.split("\n\n"))
    return [s for p in paragraphs for s in re.split(r"(?<=\.)\s+(?=[A-Z`])", p) if s]


def _bounds(spec: str) -> dict[str, str]:
    """``allowed`` of a numpydoc type that bounds a number (``float in (0, 1)``): the
    numbers or integers it allows; nothing for a bare type."""
    bounded = re.fullmatch(r"(int|float)\s+((?:in|>|>=|<|<=)\s.+)", spec.strip())
    if bounded is None:
        return {}
    return {"allowed": f"{'integers' if bounded[1] == 'int' else 'numbers'} {bounded[2]}"}


def _type(hint) -> str:
    """A field's type as a reader writes it: ``int``, ``list[float]``, ``str | None``."""
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    text = str(hint).replace("typing.", "")
    text = re.sub(r"Optional\[(.*)\]", r"\1 | None", text)
    return text.replace("NoneType", "None")


TYPE_WORDS = {bool: "true or false", int: "integers", float: "numbers", str: "text"}
"""What a field of a plain type allows, in the reference's words."""


def _allowed(field: dataclasses.Field, hint) -> str:
    """What ``field`` (of type ``hint``) allows: its declared names (``choices``) or range
    (``ranged``), else what its type takes; a list's values, each."""
    optional = type(None) in typing.get_args(hint)
    inner = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
    hint = inner if optional else hint
    is_list = typing.get_origin(hint) is list
    element = typing.get_args(hint)[0] if is_list else hint
    given, rule = field.metadata.get("allowed"), field.metadata.get("range")
    given = given() if callable(given) else given
    if isinstance(given, str):  # a text that says it all
        return given
    if given is not None:
        names = ", ".join(given)
        return f"a list of {names}" if is_list else f"one of {names}" if len(given) > 1 else names
    if rule is not None:
        text = rule.allowed(element)
    elif typing.get_origin(hint) is dict:
        value = typing.get_args(hint)[1]
        text = "a mapping" + (f" of names to {TYPE_WORDS[value]}" if value in TYPE_WORDS else "")
    else:
        text = TYPE_WORDS.get(element, "any value")
    text = f"a list of {text}" if is_list else text
    return f"{text} or null" if optional else text


def _default(field: dataclasses.Field) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def keys(schema: type, prefix: str = "", chosen: dict[str, str] | None = None) -> list[Key]:
    """Every key of the dataclass ``schema`` and of the dataclasses nested in it (as
    defaults or types), dotted (``methods.grid.horizon``), in the order they are defined. A key
    chosen as a config group (``cluster``, its schema default ``???``) shows the group's
    default from ``chosen`` (key -> the option Hydra's defaults list picks)."""
    hints = typing.get_type_hints(schema)
    docs = {name: doc for cls in reversed(schema.__mro__) for name, doc in field_docs(cls).items()}
    found = []
    for field in dataclasses.fields(schema):
        name = f"{prefix}{field.name}"
        default = _default(field)
        nested = typing.get_args(hints[field.name]) or (hints[field.name],)
        inner: type | None = next(
            (t for t in nested if isinstance(t, type) and dataclasses.is_dataclass(t)), None
        )
        if dataclasses.is_dataclass(default):
            inner = type(default)
        if inner is not None:
            found += keys(inner, f"{name}.")
            continue
        if default == MISSING and chosen and name in chosen:
            default = chosen[name]
        meaning = field.metadata.get("doc") or docs.get(field.name, "")
        allowed = _allowed(field, hints[field.name])
        found.append(Key(name, _type(hints[field.name]), repr(default), meaning, allowed))
    return found


class Experiment(NamedTuple):
    """An experiment preset: its name (``experiment=<name>``) and its summary, the first
    paragraph of its file's comment."""

    name: str
    summary: str


def _first_paragraph(comment: list[str]) -> str:
    """The lines of ``comment`` (``#`` stripped) up to its first blank one, as one line."""
    return " ".join(itertools.takewhile(bool, comment))


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
            found[path.stem] = Experiment(path.stem, _first_paragraph(comment))
    return [found[name] for name in sorted(found)]


class ClusterEntry(NamedTuple):
    """An entry of ``dask_cluster.yaml`` (``cluster=<name>``): its name, its summary (the
    first paragraph of the comment under its name) and the values it sets, dotted
    (``cluster.security.directory``)."""

    name: str
    summary: str
    values: dict[str, object]


def _dotted(mapping: dict, prefix: str) -> dict[str, object]:
    found = {}
    for key, value in mapping.items():
        if isinstance(value, dict) and value:
            found.update(_dotted(value, f"{prefix}{key}."))
        else:
            found[f"{prefix}{key}"] = value
    return found


def cluster_entries(path: Path) -> list[ClusterEntry]:
    """The entries of the ``dask_cluster.yaml`` at ``path``, in its order."""
    text = path.read_text()
    entries = yaml.safe_load(text) or {}
    lines = text.splitlines()
    found = []
    for name, entry in entries.items():
        start = lines.index(f"{name}:") + 1
        comment = itertools.takewhile(lambda line: line.strip().startswith("#"), lines[start:])
        summary = _first_paragraph([line.strip().lstrip("#").strip() for line in comment])
        found.append(ClusterEntry(name, summary, _dotted(entry or {}, "cluster.")))
    return found
