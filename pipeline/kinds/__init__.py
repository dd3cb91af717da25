"""Sweep kinds, one folder each, and the one registry every layer looks them up in.

``KINDS`` maps a store's ``kind`` attribute to its ``Kind`` (``base``): the schema of what its
stores hold, and where its sweep and its report are, imported only when used, so reading
results imports neither Dask nor Hydra. A built-in kind is a folder here whose
``__init__`` declares its ``KIND``; the registry names it once, in ``BUILTIN``. Kinds that
installed packages add (entry-point group ``pipeline.kinds``, each naming a ``Kind``) join
the built-ins in one ``pipeline.plugins.Registry``, as families and methods do.

A kind's folder holds all of it: ``config`` (its typed settings), ``grid`` (its cells),
``tasks`` (what the Dask workers run), ``sweep`` (the ``pipeline.sweep.kind.SweepKind``
interface the engine calls), ``results`` (its store's schema and summary: no Dask, no Hydra)
and ``report`` (its figures and Markdown: no Dask, no Hydra); ``docs/development.md``, "A
sweep kind", says what each holds.

The built-ins: ``methods`` (approximations against exact inference), ``training`` (HMM
language models), ``coupled`` (weakly coupled HMMs), ``kernel_features`` (random
features against the softmax) and ``learning`` (EM with an approximate E-step against exact
EM).
"""

from __future__ import annotations

import functools

from pipeline.kinds import coupled, kernel_features, learning, methods, training
from pipeline.kinds.base import Kind, Schema
from pipeline.plugins import Registry

BUILTIN = {
    "methods": methods.KIND,
    "training": training.KIND,
    "coupled": coupled.KIND,
    "kernel_features": kernel_features.KIND,
    "learning": learning.KIND,
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


__all__ = ["BUILTIN", "KINDS", "Kind", "known_names", "schema"]
