"""What a path holds, in the words the sweep and ``analyze`` share, and which chunks are sound.

``found(path)`` tells a results store from everything else a store path can hold, so both
say the same thing for the same case; ``damage(path)`` reads every chunk of a store (each
carries a CRC32C checksum, or a store from before checksums still decodes), holds its file
against its array's manifest (``pipeline.results.manifest``: a missing chunk, or one copied
from another position, reads) and names those that cannot be trusted, with the arrays
whose metadata or manifest cannot be read.
"""

from __future__ import annotations

import enum
import itertools
import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import zarr

from pipeline.results import manifest
from pipeline.results.base import FORMAT, StoreError
from pipeline.results.durable import is_temporary
from pipeline.results.kinds import known_names
from pipeline.results.manifest import MANIFEST


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
    names = {entry.name for entry in path.iterdir() if not is_temporary(entry.name)}
    if not names:
        return Found.EMPTY
    ours = names <= known_names()
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
    """One chunk of one array, or an array's metadata or manifest (``position`` None): its
    array, its position in the chunk grid, where that is (the coordinates of the dims its
    chunks split), its file (its path in the store) and, if it cannot be trusted, why."""

    array: str
    position: tuple[int, ...] | None
    where: str = ""
    error: str = ""
    file: str = ""


def metadata_problem(path, name: str) -> str:
    """Why the metadata of the array ``name`` of the store at ``path`` (``<name>/zarr.json``)
    cannot be read, in a few words; "" if it can."""
    try:
        text = Path(path, name, "zarr.json").read_bytes()
    except FileNotFoundError:
        return "it is missing"
    if not text.strip():
        return "it is empty"
    try:
        metadata = json.loads(text)
    except ValueError:
        return "it is cut short or is not JSON"
    if not isinstance(metadata, dict) or metadata.get("node_type") != "array":
        return "it describes no array"
    return ""


def arrays(path) -> dict[str, str]:
    """Every array folder of the store at ``path`` -> why its metadata cannot be read ("":
    it can)."""
    folders = sorted(p.name for p in Path(path).iterdir() if p.is_dir())
    return {name: metadata_problem(path, name) for name in folders}


def _why(error: Exception) -> str:
    """A damaged chunk's error in a few words."""
    text = (str(error).strip().splitlines() or [""])[0]
    if "checksum do not match" in text:
        return "its checksum does not match its bytes"
    return f"{type(error).__name__}: {text}"[:120]


def _where(coordinates: dict[str, zarr.Array], array: zarr.Array, position) -> str:
    """``family=bell, n_states=40``: the coordinates of a chunk along the dims that are
    split one value per chunk."""
    names = array.metadata.dimension_names or ()
    labels = []
    for dim, k, chunk in zip(names, position, array.chunks, strict=False):
        if chunk == 1 and dim in coordinates and dim != array.basename:
            try:
                labels.append(f"{dim}={np.asarray(coordinates[dim][k]).item()}")
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


def _misplaced(actual: str | None, accepted: list, entries: manifest.Entries, describe) -> str:
    """Why a chunk file that decodes is not the one the manifest lists at its key
    (``describe``: where the chunk of a key is)."""
    if actual is None:
        return "its file is missing"
    source = next((key for key, sums in entries.items() if actual in sums), None)
    if source is not None:
        return f"its bytes are those of the chunk of {describe(source)} (copied or moved here)"
    if accepted == [None]:
        return "a file is there where none was written"
    return "its bytes are not those written here"


class _Checker:
    """Whether a chunk's file is the one its array's manifest lists at its key (arrays
    without a readable manifest: trusted on their CRC32C). A sweep may be writing the store:
    on a mismatch the manifest is read again, since a flush lists its new chunks before it
    renames them into place."""

    def __init__(self, path: Path):
        self.path = path
        self.manifests = manifest.load(path)

    def __call__(self, name: str, key: str, describe) -> str:
        if name not in self.manifests.covered:
            return ""
        actual = manifest.file_checksum(self.path / key)
        if actual in self.manifests.entries.get(key, [None]):
            return ""
        again = manifest.load(self.path, [name]).entries
        accepted = again.get(key, [None])
        actual = manifest.file_checksum(self.path / key)
        return "" if actual in accepted else _misplaced(actual, accepted, again, describe)


def chunks(path) -> list[Chunk]:
    """Every chunk of every array of the store at ``path``, read and held against its
    array's manifest; ``error`` names why a chunk cannot be trusted (a checksum that does not
    match, bytes that do not decode, a file missing or copied from another position), or why
    an array's metadata or manifest cannot be read (``position`` None, ``file`` the one at
    fault)."""
    path = Path(path)
    check = _Checker(path)
    out = [
        Chunk(name, None, error=why, file=f"{name}/{MANIFEST}")
        for name, why in check.manifests.problems.items()
    ]
    group = zarr.open_group(path, mode="r", use_consolidated=False)
    readable = {}
    for name, problem in arrays(path).items():
        if not problem:
            try:
                readable[name] = group[name]
            except Exception as error:  # metadata that parses but that zarr refuses
                problem = f"it cannot be read: {_why(error)}"
        if problem:
            out.append(Chunk(name, None, error=problem, file=f"{name}/zarr.json"))
    for name, array in readable.items():
        keys = {f"{name}/{array.metadata.encode_chunk_key(p)}": p for p in _positions(array)}

        def describe(key: str, array=array, keys=keys) -> str:
            return _where(readable, array, keys[key]) if key in keys else key

        try:  # every chunk at once; one by one only where one does not decode
            np.asarray(array[...])
            decodes = True
        except Exception:  # whatever a damaged chunk makes its codecs raise
            decodes = False
        for key, position in keys.items():
            try:
                if not decodes:
                    _read(array, position)
            except Exception as error:  # whatever a damaged chunk makes its codecs raise
                error_text = _why(error)
            else:
                error_text = check(name, key, describe)
            where = _where(readable, array, position) if error_text else ""
            out.append(Chunk(name, position, where, error_text, key))
    return sorted(out, key=lambda c: (c.array, c.position is not None, c.file))


def damage(path) -> list[Chunk]:
    """The chunks, metadata and manifest of the store at ``path`` that cannot be trusted
    (none: the store is sound)."""
    return [chunk for chunk in chunks(path) if chunk.error]


FIXES = {
    "chunk": "run the same sweep command again to recompute its cells",
    "metadata": "run the same sweep command again to rebuild it from the grid, keeping every "
    "chunk that verifies",
    "manifest": "run the same sweep command again to write it again from the chunks that read",
}
"""What to do about each kind of damage (``overwrite=true`` always starts over)."""


def damage_line(path, damaged: list[Chunk]) -> str:
    """One line naming a damaged store's first bad chunk (or metadata, or manifest), how many
    there are, what to do."""
    first = damaged[0]
    others = len(damaged) - 1
    more = f" (and {others} more chunk{'s' if others > 1 else ''})" if others else ""
    if first.file.endswith(MANIFEST):
        what, fix = f"manifest of {first.array}", FIXES["manifest"]
    elif first.position is None:
        what, fix = f"metadata of {first.array}", FIXES["metadata"]
    else:
        where = f" of {first.where}" if first.where else ""
        what, fix = f"{first.array} chunk{where}", FIXES["chunk"]
    return (
        f"{path} is damaged: the {what} ({Path(path, first.file)}) cannot be read: "
        f"{first.error}{more}; {fix} (or overwrite=true to start over)"
    )
