"""How large a sweep may be, checked before anything starts: its cells and its store.

A grid's cells are counted against ``max_cells`` (a config key); its store's values, one
per cell and step of every variable, are counted from the schema and the grid's dims
without making either (``store_bytes``). The sweep's process keeps a mirror of every
variable in memory beside the template it creates the store from, and the store on disk
holds up to as many bytes before compression: a store past ``MEMORY_SHARE`` of this
machine's memory or past the free space of its disk is refused in one line naming the
estimate and the limit, before a cluster starts or a byte is written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from distributed.system import MEMORY_LIMIT

from pipeline.results import Schema
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.kind import Grid

ITEM_BYTES = {"float64": 8, "bool": 1, "str": 8}
"""Bytes a value of each variable dtype takes in the mirror (a string: its reference)."""
MEMORY_SHARE = 0.25
"""The largest share of this machine's memory a store may take: the mirror and the template
it is created from are two copies, and the sweep's process holds the models it checks."""


def store_bytes(schema: Schema, grid: Grid) -> int:
    """The bytes of every variable of ``schema`` over ``grid``'s dims, uncompressed."""
    sizes = grid.dim_lengths()
    total = 0
    for variable in schema.variables.values():
        count = 1
        for dim in variable.dims:
            count *= sizes[dim]
        total += count * ITEM_BYTES[variable.dtype]
    return total


def _free_disk(path: Path) -> int:
    """Free bytes on the file system that would hold ``path`` (its nearest existing parent)."""
    folder = Path(path).absolute()
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free


def _size(count: float) -> str:
    """``count`` bytes as a person reads them: 512 B, 3.4 MiB, 1,536 GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{count:.0f} B"


def _lengths(grid: Grid) -> str:
    return ", ".join(f"{dim} {count:,}" for dim, count in grid.dim_lengths().items())


def check_bounds(schema: Schema, grid: Grid, *, max_cells: int) -> None:
    """Raise ``ConfigError`` when ``grid`` has more than ``max_cells`` cells or its store would
    not fit this machine's memory (``MEMORY_SHARE``)."""
    cells = grid.n_cells()
    if cells > max_cells:
        raise ConfigError(
            "max_cells",
            f"the grid has {cells:,} cells, more than max_cells={max_cells:,}; allowed: a "
            "smaller grid, or a larger max_cells if it is meant",
        )
    need, memory = store_bytes(schema, grid), MEMORY_SHARE * MEMORY_LIMIT
    if need > memory:
        raise ConfigError(
            "grid",
            f"the store would hold {_size(need)} ({_lengths(grid)}), more than "
            f"{_size(memory)} ({MEMORY_SHARE:.0%} of this machine's memory, which keeps it "
            "while the sweep runs); allowed: fewer cells or a shorter horizon",
        )


def check_room(schema: Schema, grid: Grid, store: Path) -> None:
    """Raise ``ConfigError`` when the store of ``grid`` at ``store`` (a path that can be
    written) could take more than the free space of its disk."""
    need, free = store_bytes(schema, grid), _free_disk(store)
    if need > free:
        raise ConfigError(
            "store",
            f"{store} would take up to {_size(need)} ({_lengths(grid)}) and its disk has "
            f"{_size(free)} free; allowed: a store on a disk with room, or a smaller grid",
        )
