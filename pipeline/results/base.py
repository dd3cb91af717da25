"""What every results store shares: its layout version, its kind, and the error of a path that
holds none. What a store of each kind holds is its ``pipeline.kinds`` schema."""

from __future__ import annotations

FORMAT = 2
"""The layout of the store (attribute ``format``): 2 has the ``method`` and ``setting``
dims; stores without the attribute are of version 1 (a ``p`` dim, top-p only)."""

DEFAULT_KIND = "methods"
"""The kind of a store without a ``kind`` attribute: the methods sweep's stores have none."""


class StoreError(ValueError):
    """A path that holds no results store this pipeline reads: one line naming the path and
    what to do."""


def kind_of(attrs: dict) -> str:
    """The sweep kind that wrote a store with these attributes."""
    return attrs.get("kind", DEFAULT_KIND)
