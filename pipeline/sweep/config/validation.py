"""What every sweep's config shares: the checks its keys go through (every key declared by
the schema, ``check_keys``; the numbers' ranges declared on the schema's fields, ``ranged``,
and checked by one validator, ``check_ranges``; the names a key allows, ``choices``), the
check of the store's path, and a section as a plain ``dict`` (``as_dict``). Each raises
``errors.ConfigError``."""

from __future__ import annotations

import dataclasses
import difflib
import os
import tempfile
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, ListConfig, OmegaConf

from pipeline.sweep.config.errors import ConfigError


def as_dict(node: DictConfig, *, resolve: bool = False) -> dict:
    """A mapping of the config (a section, or the whole config) as plain Python values
    (``OmegaConf.to_container``'s), its interpolations resolved where ``resolve``."""
    plain = OmegaConf.to_container(node, resolve=resolve)
    assert isinstance(plain, dict), "a DictConfig holds a mapping"
    return plain


def unknown_key(key: str, allowed: list[str]) -> ConfigError:
    """The error of ``key`` (dotted), which its section does not declare: every key it
    allows, and the closest of them (``difflib``) where one is close, as a typo's fix."""
    section, _, name = key.rpartition(".")
    close = difflib.get_close_matches(name, allowed, n=1)
    fix = f"did you mean {section + '.' if section else ''}{close[0]}? " if close else ""
    return ConfigError(key, f"unknown key; {fix}allowed: {', '.join(allowed)}")


def check_keys(node: DictConfig, prefix: str = "") -> None:
    """Raise ``unknown_key`` at the first key of a composed config (its keys named ``prefix``
    + key) that its schema does not declare: Hydra adds a ``+key`` (or ``++key``) to any
    section. A section typed by a dataclass allows its fields; one typed as a mapping takes
    any key (a plug-in family's parameters ``methods.model.<family>``, ssh's
    ``cluster.connect_options``, ``coupled.relational``), as do the values of keys typed
    ``Any`` (``methods.grid.methods``, ``methods.grid.n_states``), which their kind checks."""
    schema = OmegaConf.get_type(node)
    if dataclasses.is_dataclass(schema):
        allowed = [item.name for item in dataclasses.fields(schema)]
        for name in node:
            if name not in allowed:
                raise unknown_key(f"{prefix}{name!s}", allowed)
    for name, value in node.items_ex(resolve=False):
        if isinstance(value, DictConfig) and OmegaConf.get_type(value) is not None:
            check_keys(value, f"{prefix}{name!s}.")  # null: the section of a kind not chosen


INT64 = (-(2**63), 2**63 - 1)
"""The range of the store's integer coordinates."""


def check_list(key: str, values, kind, allowed: str) -> None:
    """Raise ``ConfigError`` at ``key`` unless ``values`` is a non-empty list of distinct
    ``kind`` values (no bools); ``allowed`` says what is allowed."""
    if not values:
        raise ConfigError(key, f"must not be empty; allowed: a list of {allowed}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ConfigError(key, f"{value!r} is not allowed; allowed: {allowed}")
        if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
            raise ConfigError(
                key, f"{value} does not fit the store's 64-bit integers; allowed: {allowed}"
            )
    if len(set(values)) != len(values):
        raise ConfigError(key, f"has duplicates {list(values)}; list each value once")


@dataclass(frozen=True)
class Range:
    """The numbers a key allows, declared on its schema field (``ranged``): at least
    ``least`` (above it with ``above``), at most ``most`` (below it with ``below``); a
    string bound names another key of the same section. A list's every value is checked; a
    null passes where the field allows it."""

    least: float | str | None = None
    most: float | str | None = None
    above: bool = False
    below: bool = False

    def allowed(self, hint, section=None) -> str:
        """What a key of type ``hint`` allows, as its error says it: ``integers >= 1``,
        ``numbers in (0, 1] or null``; a bound naming another key is that key's value in
        ``section`` (its name without one)."""
        least, most = (_shown(self._bound(section, b)) for b in (self.least, self.most))
        kind = "integers" if int in (hint, *typing.get_args(hint)) else "numbers"
        if least is not None and most is not None:
            opening, closing = "(" if self.above else "[", ")" if self.below else "]"
            text = f"{kind} in {opening}{least}, {most}{closing}"
        elif least is not None:
            text = f"{kind} {'>' if self.above else '>='} {least}"
        else:
            text = f"{kind} {'<' if self.below else '<='} {most}"
        return f"{text} or null" if type(None) in typing.get_args(hint) else text

    def admits(self, section, value) -> bool:
        """Whether ``value`` is in range (``section``: the bounds named by key)."""
        least, most = (self._bound(section, b) for b in (self.least, self.most))
        low = least is None or (value > least if self.above else value >= least)
        high = most is None or (value < most if self.below else value <= most)
        return low and high

    @staticmethod
    def _bound(section, bound):
        return section[bound] if isinstance(bound, str) and section is not None else bound


def _shown(bound) -> str | None:
    return bound if bound is None or isinstance(bound, str) else f"{bound:g}"


def ranged(default, **rule):
    """A schema field (``dataclasses.field``) whose values ``Range(**rule)`` bounds;
    ``default`` a value, or a callable making it (a list's)."""
    metadata = {"range": Range(**rule)}
    if callable(default):
        return field(default_factory=default, metadata=metadata)
    return field(default=default, metadata=metadata)


def choices(default, allowed):
    """A schema field (``dataclasses.field``) whose allowed values ``allowed`` names, for the
    reference and the help: the names a value is one of (a callable giving them, asked when
    read: a registry's names include the plug-ins installed), or a text that says what is
    allowed. The kind that reads the key checks its values against the same names;
    ``default`` a value, or a callable making it (a list's)."""
    if callable(default):
        return field(default_factory=default, metadata={"allowed": allowed})
    return field(default=default, metadata={"allowed": allowed})


def optional(hint):
    """``X | None`` as ``Optional[X]``, which every OmegaConf 2.x understands."""
    if isinstance(hint, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return Optional[inner]  # noqa: UP045 - OmegaConf needs typing.Optional
    return hint


def check_ranges(section, schema: type, prefix: str = "") -> None:
    """Raise ``ConfigError`` at the first key of ``section`` (a config section of the
    dataclass ``schema``, its keys named ``prefix`` + field) whose value its ``Range``
    does not allow, the sections of its dataclass-typed fields included."""
    hints = typing.get_type_hints(schema)
    for item in dataclasses.fields(schema):
        value, key = section[item.name], f"{prefix}{item.name}"
        rule = item.metadata.get("range")
        if rule is None:
            inner = _dataclass(hints[item.name])
            if inner is not None and value is not None:
                check_ranges(value, inner, f"{key}.")
            continue
        values = list(value) if isinstance(value, list | tuple | ListConfig) else [value]
        for one in values:
            if isinstance(one, bool) or not isinstance(one, int | float):
                continue  # null, or not a number: the type checks say so
            if not rule.admits(section, one):
                allowed = rule.allowed(hints[item.name], section)
                raise ConfigError(key, f"{one} is not allowed; allowed: {allowed}")


def _element_types(hint) -> tuple:
    """The types inside ``hint``: a list's elements, an optional's value."""
    return tuple(arg for arg in typing.get_args(hint) if arg is not type(None))


def _dataclass(hint) -> type | None:
    """The dataclass ``hint`` is, or is optionally; else None."""
    for candidate in (hint, *_element_types(hint)):
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None


def _probe(folder: Path) -> str | None:
    """Why a file cannot be created (and removed) in ``folder``, or None if it can."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as error:
        return error.strerror or type(error).__name__
    return None


NAME_MARGIN = 30
"""Bytes a store's name must leave free in a file name: the sweep names what it makes beside
the store after it, ``.<name>.<pid>.creating`` (``.replaced``, ``.discarded``: up to 19 more
with a 7-digit PID) and ``<name>.lock`` (5 more), and this leaves room to spare."""


def _shortened(name: str, width: int = 24) -> str:
    return name if len(name) <= width else f"{name[: width - 3]}..."


def _check_lengths(path: Path, parent: Path) -> None:
    """Raise ``ConfigError`` unless the file system of ``parent``, the nearest existing folder
    of ``path``, takes the names of the folders to be made down to the store and the store's
    own with ``NAME_MARGIN`` bytes to spare, and the whole path with as many."""
    longest = os.pathconf(parent, "PC_NAME_MAX")
    *folders, name = path.relative_to(parent).parts
    for folder in folders:
        if len(os.fsencode(folder)) > longest:
            raise ConfigError(
                "store",
                f"the folder name {_shortened(folder)!r} is {len(os.fsencode(folder))} bytes "
                f"long; the file system of {parent} allows {longest} in a name; allowed: a "
                f"name of at most {longest} bytes",
            )
    if len(os.fsencode(name)) + NAME_MARGIN > longest:
        raise ConfigError(
            "store",
            f"the store's name {_shortened(name)!r} is {len(os.fsencode(name))} bytes long; the "
            f"file system of {parent} allows {longest} in a name, and the sweep names what it "
            f"makes beside the store after it with up to {NAME_MARGIN} more (.<name>.<pid>."
            f"creating, <name>.lock); allowed: a name of at most {longest - NAME_MARGIN} bytes",
        )
    whole, most = len(os.fsencode(os.path.abspath(path))), os.pathconf(parent, "PC_PATH_MAX")
    if whole + NAME_MARGIN > most:
        raise ConfigError(
            "store",
            f"its path is {whole} bytes long; the file system of {parent} allows {most} in a "
            f"path, and the sweep needs {NAME_MARGIN} more; allowed: a shorter path",
        )


def check_writable(path: Path) -> None:
    """Raise ``ConfigError`` unless a store can be created or updated at ``path``: its names
    fit the file system (``_check_lengths``), and a file is created and removed where the
    store and its lock go (not ``os.access``, which a read-only or virtual file system
    answers wrongly)."""
    path = Path(path)
    if not path.name or path.name in (".", ".."):
        raise ConfigError(
            "store", f"{str(path)!r} names no store; allowed: a folder's path, e.g. outputs/x.zarr"
        )
    parent = path.parent
    while not os.path.exists(parent):  # False for a name too long, which Path.exists raises
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError("store", f"cannot create {path}: {parent} is not a directory")
    _check_lengths(path, parent)
    for folder in (parent, path) if path.is_dir() else (parent,):
        why = _probe(folder)
        if why:
            raise ConfigError("store", f"cannot write {path}: {folder} refuses new files ({why})")
