"""Every sweep kind's schema, by the store's ``kind`` attribute."""

from __future__ import annotations

from pipeline.results import coupled, kernel_features, methods, training
from pipeline.results.base import Schema

SCHEMAS: dict[str, Schema] = {
    module.SCHEMA.name: module.SCHEMA for module in (methods, training, coupled, kernel_features)
}
"""Sweep kind (a store's ``kind`` attribute) -> what its store holds."""

KNOWN_NAMES = frozenset(
    {"zarr.json", "in_grid"}
    | {name for schema in SCHEMAS.values() for name in (*schema.variables, *schema.coordinates)}
    | {name for schema in SCHEMAS.values() for name in schema.dims}
)
"""Every entry a store of this pipeline holds: a folder of only these is one of ours."""
