"""Which parts of a store are sound: the whole store checked, nothing read past its bound.

``damage(path)`` checks the whole store: its root metadata reads; every array its kind's
schema requires is there, with the dims, shape, chunks and dtype the store's coordinates
give it; and every chunk (each carries a CRC32C checksum, or a store from before checksums
still decodes) is a regular file no larger than its array's chunks can be, that decodes and
that its array's manifest (``pipeline.results.manifest``) lists at its position (a missing
chunk, or one copied from another position, reads). It names what cannot be trusted. A link
to a device, a FIFO or a folder where a chunk belongs is named from its directory entry,
never opened.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import zarr
from zarr.core.metadata import ArrayV3Metadata

from pipeline.results import manifest
from pipeline.results.base import kind_of
from pipeline.results.manifest import MANIFEST, file_problem
from pipeline.results.paths import (
    METADATA,
    REBUILD_ROOT,
    arrays,
    attributes,
    metadata_problem,
    root_problem,
)
from pipeline.results.registry import KINDS
from pipeline.results.schema import Schema

ROOT = ""
"""The ``array`` of a ``Chunk`` that stands for the store's root metadata (``zarr.json``)."""
TEXT_BYTES = 1 << 16
"""The most bytes one text value (a failed cell's ``error``) may take in a chunk."""
CHUNK_OVERHEAD = 1 << 12
"""Bytes a chunk may take beyond its values: zstd's frame and block headers (a frame never
grows its input by more than a byte in 128, plus this) and the CRC32C."""


class Chunk(NamedTuple):
    """One chunk of one array, or an array's metadata or manifest (``position`` None): its
    array, its position in the chunk grid, where that is (the coordinates of the dims its
    chunks split), its file (its path in the store) and, if it cannot be trusted, why."""

    array: str
    position: tuple[int, ...] | None
    where: str = ""
    error: str = ""
    file: str = ""


def _why(error: Exception) -> str:
    """A damaged chunk's error in a few words."""
    text = (str(error).strip().splitlines() or [""])[0]
    if "checksum do not match" in text:
        return "its checksum does not match its bytes"
    return f"{type(error).__name__}: {text}"[:120]


def _dim_names(array: zarr.Array) -> tuple:
    """The names of ``array``'s dims, () for none (a store's arrays are zarr format 3)."""
    metadata = array.metadata
    assert isinstance(metadata, ArrayV3Metadata), "a zarr format 3 array"
    return tuple(metadata.dimension_names or ())


def _where(coordinates: dict[str, zarr.Array], array: zarr.Array, position) -> str:
    """``family=bell, n_states=40``: the coordinates of a chunk along the dims that are
    split one value per chunk."""
    names = _dim_names(array)
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


def _read(array: zarr.Array, position: tuple[int, ...]) -> np.ndarray:
    where = tuple(
        slice(k * chunk, min((k + 1) * chunk, size))
        for k, chunk, size in zip(position, array.chunks, array.shape, strict=True)
    )
    return np.asarray(array[where])


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
        try:
            actual = manifest.file_checksum(self.path / key)
            if actual in self.manifests.entries.get(key, [None]):
                return ""
            again = manifest.load(self.path, [name]).entries
            accepted = again.get(key, [None])
            actual = manifest.file_checksum(self.path / key)
        except ValueError as error:  # replaced by what no chunk can be since it was looked at
            return str(error)
        return "" if actual in accepted else _misplaced(actual, accepted, again, describe)


def _schema(path: Path) -> Schema | None:
    """The schema of the kind that wrote the store at ``path`` (None: its root cannot be
    read, or the kind is not installed)."""
    try:
        return KINDS.lookup(kind_of(attributes(path) or {})).schema
    except ValueError:
        return None


def _dtype_fits(actual, declared: str) -> bool:
    if declared == "str":
        return np.dtype(actual).kind in "OTU"
    return np.dtype(actual) == np.dtype(declared)


def _layout(schema: Schema, readable: dict[str, zarr.Array], present: set[str]) -> dict:
    """Array -> why it is not what ``schema`` requires ("it is missing", or its dims, shape,
    chunks or dtype): every variable, ``in_grid`` where the schema has it, and the coordinate
    of every dim; a dim's length is its coordinate's (or, where that cannot be read, the
    first array's that has the dim)."""
    variables = {name: (v.dims, v.dtype) for name, v in schema.variables.items()}
    if schema.in_grid_dims:
        variables["in_grid"] = (schema.in_grid_dims, "bool")
    dims = sorted({d for (names, _) in variables.values() for d in names})
    sizes = {d: readable[d].shape[0] for d in dims if d in readable and readable[d].ndim == 1}
    for array in readable.values():
        for d, n in zip(_dim_names(array), array.shape, strict=False):
            sizes.setdefault(d, n)
    problems = {}
    for name in sorted({*variables, *dims}):
        if name not in present:
            problems[name] = "it is missing"
        elif name in readable:
            wanted, dtype = variables.get(name, ((name,), ""))
            array = readable[name]
            got = _dim_names(array)
            shape = tuple(sizes.get(d, n) for d, n in zip(wanted, array.shape, strict=False))
            chunks = (1, 1, *shape[2:]) if name in schema.variables else array.chunks
            if got != wanted:
                problems[name] = f"its dims are {got}, not {wanted}"
            elif array.shape != shape:
                problems[name] = f"its shape is {array.shape}, its coordinates give {shape}"
            elif array.chunks != chunks:
                problems[name] = f"its chunks are {array.chunks}, not {chunks}"
            elif dtype and not _dtype_fits(array.dtype, dtype):
                problems[name] = f"its dtype is {array.dtype}, not {dtype}"
    return problems


def chunk_limit(array: zarr.Array) -> int:
    """The most bytes a chunk file of ``array`` can hold: its values (a text value at most
    ``TEXT_BYTES``), what zstd may add to them, and ``CHUNK_OVERHEAD``."""
    per_value = TEXT_BYTES if np.dtype(array.dtype).kind in "OTU" else array.dtype.itemsize
    raw = math.prod(array.chunks) * per_value
    return raw + raw // 128 + CHUNK_OVERHEAD


def _array_chunks(path: Path, name: str, array: zarr.Array, readable, check) -> list[Chunk]:
    """Every chunk of ``array``: read (at once where every file may be a chunk, else one by
    one, never a file that cannot be one) and held against its manifest."""
    keys = {f"{name}/{array.metadata.encode_chunk_key(p)}": p for p in _positions(array)}
    limit = chunk_limit(array)
    unsafe = {key: why for key in keys if (why := file_problem(path / key, limit))}

    def describe(key: str) -> str:
        return _where(readable, array, keys[key]) if key in keys else key

    decodes = False
    if not unsafe:
        try:  # every chunk at once; one by one only where one does not decode
            np.asarray(array[...])
            decodes = True
        except Exception:  # whatever a damaged chunk makes its codecs raise
            pass
    out = []
    for key, position in keys.items():
        error_text = unsafe.get(key, "")
        if not error_text:
            try:
                if not decodes:
                    _read(array, position)
            except Exception as error:  # whatever a damaged chunk makes its codecs raise
                error_text = _why(error)
            else:
                error_text = check(name, key, describe)
        where = _where(readable, array, position) if error_text else ""
        out.append(Chunk(name, position, where, error_text, key))
    return out


def _structure(path: Path) -> tuple[list[Chunk], dict[str, zarr.Array], _Checker]:
    """``structure``, with the arrays whose metadata reads and fits (to read their chunks)
    and the manifests' checker."""
    root = root_problem(path)
    out = [Chunk(ROOT, None, error=root, file=METADATA)] if root else []
    check = _Checker(path)
    out += [
        Chunk(name, None, error=why, file=f"{name}/{MANIFEST}")
        for name, why in check.manifests.problems.items()
    ]
    present = arrays(path)
    readable = {}
    for name, problem in present.items():
        if not problem:
            try:
                readable[name] = zarr.open_array(path / name, mode="r")
            except Exception as error:  # metadata that parses but that zarr refuses
                problem = f"it cannot be read: {_why(error)}"
        if problem:
            out.append(Chunk(name, None, error=problem, file=f"{name}/{METADATA}"))
    schema = None if root else _schema(path)
    if schema is not None:
        for name, why in _layout(schema, readable, set(present)).items():
            readable.pop(name, None)
            gone = name not in present and name in schema.variables  # its cells are lost
            out.append(Chunk(name, None, error=why, file=name if gone else f"{name}/{METADATA}"))
    return out, readable, check


def structure(path) -> list[Chunk]:
    """What cannot be trusted in the store at ``path``, its chunks unread: its root metadata
    (``array`` ``ROOT``), each array's metadata and manifest, and every array its kind
    requires (``_layout``); ``file`` is the one at fault: the folder of a variable that is
    missing, the ``zarr.json`` of a coordinate that is (the grid gives it again)."""
    return _structure(Path(path))[0]


def chunks(path) -> list[Chunk]:
    """The whole store at ``path`` checked: its structure (``structure``) and every chunk of
    every array that reads, within its bound and against its array's manifest; ``error``
    names why a chunk cannot be trusted (a checksum that does not match, bytes that do not
    decode, a file missing, copied from another position, or that no chunk can be: a link,
    a device, a folder, too large)."""
    out, readable, check = _structure(Path(path))
    for name, array in readable.items():
        out += _array_chunks(Path(path), name, array, readable, check)
    return sorted(out, key=lambda c: (c.array, c.position is not None, c.file))


def finished(path) -> int | None:
    """How many cells the store at ``path`` holds as finished (its ``done`` flags, each chunk
    read within its bound); 0 where it has no ``done`` array at all, None where its flags
    cannot all be read (its metadata or a chunk): they may hold finished cells."""
    if not Path(path, "done").exists():
        return 0
    if metadata_problem(path, "done"):
        return None
    try:
        done = zarr.open_array(Path(path, "done"), mode="r")
        limit, total = chunk_limit(done), 0
        for position in _positions(done):
            key = done.metadata.encode_chunk_key(position)
            if file_problem(Path(path, "done", key), limit):
                return None
            total += int(np.count_nonzero(_read(done, position)))
    except Exception:  # whatever damaged metadata or a damaged chunk makes zarr raise
        return None
    return total


def damage(path) -> list[Chunk]:
    """The chunks, metadata and manifest of the store at ``path`` that cannot be trusted
    (none: the store is sound)."""
    return [chunk for chunk in chunks(path) if chunk.error]


FIXES = {
    "chunk": "run the same sweep command again to recompute its cells",
    "metadata": REBUILD_ROOT,
    "array": "run the same sweep command again to rebuild it and compute its cells again",
    "manifest": "run the same sweep command again to write it again from the chunks that read",
}
"""What to do about each kind of damage: the same command repairs it, keeping every cell
that verifies."""


def damage_line(path, damaged: list[Chunk]) -> str:
    """One line naming a damaged store's first bad chunk (or root metadata, metadata, missing
    array or manifest), how many there are, what to do."""
    first = damaged[0]
    others = len(damaged) - 1
    more = f" (and {others} more chunk{'s' if others > 1 else ''})" if others else ""
    if first.file.endswith(MANIFEST):
        what, fix = f"manifest of {first.array}", FIXES["manifest"]
    elif first.array == ROOT:
        what, fix = "root metadata", REBUILD_ROOT
    elif first.file == first.array:
        what, fix = f"array {first.array}", FIXES["array"]
    elif first.position is None:
        what, fix = f"metadata of {first.array}", FIXES["metadata"]
    else:
        where = f" of {first.where}" if first.where else ""
        what, fix = f"{first.array} chunk{where}", FIXES["chunk"]
    problem = "is missing" if first.file == first.array else f"cannot be read: {first.error}"
    return f"{path} is damaged: the {what} ({Path(path, first.file)}) {problem}{more}; {fix}"
