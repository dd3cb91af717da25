"""Sweep kinds: the ``Kind`` every kind declares, and the one registry every layer looks a
kind up in, by a store's ``kind`` attribute.

A kind lives in one folder, ``pipeline/kinds/<kind>/`` for a built-in, whose ``__init__``
declares its ``KIND``; that folder uses the engine (``pipeline.sweep``) and the reports
(``pipeline.analysis``), so it sits above them, and this registry, which they read, below.
``BUILTIN`` therefore names each built-in kind as an entry point names a plug-in's
(``module:attribute``), and ``KINDS`` loads it as it loads a plug-in: on first use, and only
that kind. Kinds that installed packages add (entry-point group ``pipeline.kinds``, each
naming a ``Kind``) join the built-ins in the same ``pipeline.plugins.Registry``, as families
and methods do. A ``Kind`` names its sweep and its report the same way, so reading results
imports neither Dask nor Hydra.

The built-ins: ``methods`` (approximations against exact inference), ``training`` (HMM
language models), ``coupled`` (weakly coupled HMMs), ``kernel_features`` (random features
against the softmax) and ``learning`` (EM with an approximate E-step against exact EM).
"""

from __future__ import annotations

import functools
import importlib
from typing import NamedTuple

from pipeline.plugins import Registry
from pipeline.results.schema import Schema


class Kind(NamedTuple):
    """A sweep kind: its stores' ``schema``, and ``module:name`` of its ``sweep`` (a module
    with the ``pipeline.sweep.kind.SweepKind`` interface: just the module) and its ``report``
    function (``analyze(ds, store, out) -> pipeline.analysis.Analysis``). The two are named,
    not imported: a reader of stores imports neither."""

    schema: Schema
    sweep: str
    report: str

    def load(self, part: str):
        """The kind's ``sweep`` module or ``report`` function, imported now."""
        module, _, name = getattr(self, part).partition(":")
        found = importlib.import_module(module)
        return getattr(found, name) if name else found


BUILTIN = {
    name: f"pipeline.kinds.{name}:KIND"
    for name in ("methods", "training", "coupled", "kernel_features", "learning")
}
"""The built-in kinds: name (a store's ``kind`` attribute) -> where its ``Kind`` is, as an
entry point names it."""

KINDS = Registry[Kind]("sweep kind", "pipeline.kinds", BUILTIN)
"""Sweep kind -> its ``Kind``: the built-ins, then plug-ins (``pipeline.plugins``)."""


def schema(kind: str) -> Schema:
    """What the stores of ``kind`` hold; ``ValueError`` naming the kinds installed."""
    return KINDS.lookup(kind).schema


@functools.cache
def known_names() -> frozenset:
    """Every entry a store of this pipeline holds: a folder of only these is one of ours."""
    schemas = [kind.schema for kind in KINDS.values()]
    return frozenset(
        {"zarr.json", "in_grid"}
        | {name for s in schemas for name in (*s.variables, *s.coordinates, *s.dims)}
    )
