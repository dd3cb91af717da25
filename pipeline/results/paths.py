"""What a path holds, in the words the sweep and ``analyze`` share, and which chunks are sound.

``found(path)`` tells a results store from everything else a store path can hold, so both
say the same thing for the same case; ``damage(path)`` reads every chunk of a store (each
carries a CRC32C checksum, or a store from before checksums still decodes) and names those
that cannot be read.
"""

from __future__ import annotations

import enum
import itertools
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import zarr

from pipeline.results.base import FORMAT, StoreError
from pipeline.results.kinds import KNOWN_NAMES


class Found(enum.Enum):
    """What a store path holds."""

    MISSING = "does not exist"
    EMPTY = "is an empty directory"
    FILE = "is a file"
    FOLDER = "is a directory but no zarr store"
    FOREIGN = "is a zarr store of another program"
    HALF_MADE = "is a half-made results store"
    UNREADABLE = "is a results store whose metadata cannot be read"
    OLD = "is a results store of an older layout"
    RESULTS = "is a results store"


REPLACE = "run its sweep again with overwrite=true to replace it"
WHAT_TO_DO = {
    Found.MISSING: "run its sweep first, or give the path of a sweep's results store",
    Found.EMPTY: "run its sweep first, or give the path of a sweep's results store",
    Found.FILE: "a store is a directory: give another path (store=)",
    Found.FOLDER: "give another path (store=): a sweep never writes into a folder that holds "
    "something else",
    Found.FOREIGN: "give another path (store=): overwrite=true never replaces another program's "
    "data",
    Found.HALF_MADE: f"its creation was interrupted: {REPLACE}",
    Found.UNREADABLE: REPLACE,
    Found.OLD: REPLACE,
}
"""What to do about each thing a store path can hold; the sweep and ``analyze`` say the same."""


def _attributes(path: Path) -> dict | None:
    """The root group's attributes, or None where ``path`` is no readable zarr group."""
    try:
        return zarr.open_group(path, mode="r", use_consolidated=False).attrs.asdict()
    except (OSError, ValueError, KeyError, TypeError):
        return None


def found(path) -> Found:
    """What ``path`` holds (reads a few small files, writes nothing)."""
    path = Path(path)
    if not path.exists():
        return Found.MISSING
    if not path.is_dir():
        return Found.FILE
    names = {entry.name for entry in path.iterdir()}
    if not names:
        return Found.EMPTY
    ours = names <= KNOWN_NAMES
    if "zarr.json" not in names:
        return Found.HALF_MADE if ours else Found.FOLDER
    attrs = _attributes(path)
    if attrs is not None and "grid" in attrs:
        return Found.OLD if attrs.get("format", 1) != FORMAT else Found.RESULTS
    if not ours:
        return Found.FOREIGN
    # only our arrays: a writer that died before the attributes, or a damaged root
    return Found.HALF_MADE if attrs == {} else Found.UNREADABLE


def problem(path, what: Found) -> str:
    """The one line saying what ``path`` holds and what to do about it."""
    if what is Found.OLD:
        layout = (_attributes(path) or {}).get("format", 1)
        detail = (
            f" (layout {layout}; this pipeline reads layout {FORMAT}, with the method and "
            "setting dims: see the README's release notes)"
        )
    else:
        detail = ""
    return f"{path} {what.value}{detail}; {WHAT_TO_DO[what]}"


def require_results(path) -> dict:
    """The attributes of the results store at ``path``; ``StoreError`` for anything else."""
    what = found(path)
    if what is not Found.RESULTS:
        raise StoreError(problem(path, what))
    return _attributes(Path(path))


class Chunk(NamedTuple):
    """One chunk of one array: its name, its position in the chunk grid, where that is (the
    coordinates of the dims its chunks split), and, if it cannot be read, why."""

    array: str
    position: tuple[int, ...]
    where: str = ""
    error: str = ""


def _why(error: Exception) -> str:
    """A damaged chunk's error in a few words."""
    text = (str(error).strip().splitlines() or [""])[0]
    if "checksum do not match" in text:
        return "its checksum does not match its bytes"
    return f"{type(error).__name__}: {text}"[:120]


def _where(group: zarr.Group, array: zarr.Array, position: tuple[int, ...]) -> str:
    """``family=bell, n_states=40``: the coordinates of a chunk along the dims that are
    split one value per chunk."""
    names = array.metadata.dimension_names or ()
    labels = []
    for dim, k, chunk in zip(names, position, array.chunks, strict=False):
        if chunk == 1 and dim in group and dim != array.basename:
            try:
                labels.append(f"{dim}={np.asarray(group[dim][k]).item()}")
            except Exception:  # a damaged coordinate: the position says enough
                labels.append(f"{dim}[{k}]")
    return ", ".join(labels)


def _positions(array: zarr.Array):
    grid = [range(math.ceil(s / c)) for s, c in zip(array.shape, array.chunks, strict=True)]
    return itertools.product(*grid)


def _read(array: zarr.Array, position: tuple[int, ...]) -> None:
    where = tuple(
        slice(k * chunk, min((k + 1) * chunk, size))
        for k, chunk, size in zip(position, array.chunks, array.shape, strict=True)
    )
    np.asarray(array[where])


def chunks(path) -> list[Chunk]:
    """Every chunk of every array of the store at ``path``, read; ``error`` names why a chunk
    cannot be read (a checksum that does not match, bytes that do not decode)."""
    group = zarr.open_group(Path(path), mode="r", use_consolidated=False)
    out = []
    for name in sorted(group.array_keys()):
        array = group[name]
        for position in _positions(array):
            try:
                _read(array, position)
            except Exception as error:  # whatever a damaged chunk makes its codecs raise
                out.append(Chunk(name, position, _where(group, array, position), _why(error)))
            else:
                out.append(Chunk(name, position))
    return out


def damage(path) -> list[Chunk]:
    """The chunks of the store at ``path`` that cannot be read (none: the store is sound)."""
    return [chunk for chunk in chunks(path) if chunk.error]


def damage_line(path, damaged: list[Chunk]) -> str:
    """One line naming a damaged store's first bad chunk, how many there are, what to do."""
    first = damaged[0]
    others = len(damaged) - 1
    more = f" (and {others} more chunk{'s' if others > 1 else ''})" if others else ""
    file = Path(path, first.array, "c", *map(str, first.position))
    where = f" of {first.where}" if first.where else ""
    return (
        f"{path} is damaged: the {first.array} chunk{where} ({file}) cannot be read: "
        f"{first.error}{more}; run the same sweep command again to recompute its cells "
        "(or overwrite=true to start over)"
    )
