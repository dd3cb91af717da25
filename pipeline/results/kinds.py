"""Sweep kinds, one registry for every layer: ``KINDS`` maps a store's ``kind`` attribute to
its ``Kind``: the schema of what its stores hold (this layer's), and where the layers above
find its sweep (``pipeline.sweep``) and its report (``pipeline.analysis``), imported only when
used, so reading results imports neither.

The built-ins (``methods``, ``training``, ``coupled``, ``kernel_features``) and the kinds
installed packages add (entry-point group ``pipeline.kinds``, each naming a ``Kind``) are
one ``pipeline.plugins.Registry``, as families and methods are. A kind's sweep is a module
with the ``pipeline.sweep.kind.SweepKind`` interface; its report a function
``analyze(ds, store, out) -> Analysis``.
"""

from __future__ import annotations

import functools
import importlib
from typing import NamedTuple

from pipeline.plugins import Registry
from pipeline.results import coupled, kernel_features, methods, training
from pipeline.results.base import Schema


class Kind(NamedTuple):
    """A sweep kind: its stores' ``schema``, and ``module:name`` of its ``sweep`` (a module
    with the ``SweepKind`` interface: just the module) and its ``report`` function."""

    schema: Schema
    sweep: str
    report: str

    def load(self, part: str):
        """The kind's ``sweep`` module or ``report`` function, imported now."""
        module, _, name = getattr(self, part).partition(":")
        found = importlib.import_module(module)
        return getattr(found, name) if name else found


BUILTIN = {
    "methods": Kind(
        methods.SCHEMA, "pipeline.sweep.kinds.methods", "pipeline.analysis.methods:analyze"
    ),
    "training": Kind(
        training.SCHEMA, "pipeline.sweep.kinds.training", "pipeline.analysis.training:analyze"
    ),
    "coupled": Kind(
        coupled.SCHEMA, "pipeline.sweep.kinds.coupled", "pipeline.analysis.coupled:analyze"
    ),
    "kernel_features": Kind(
        kernel_features.SCHEMA,
        "pipeline.sweep.kinds.kernel_features",
        "pipeline.analysis.kernel_features:analyze",
    ),
}
"""The built-in kinds: name (a store's ``kind`` attribute) -> ``Kind``."""

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
