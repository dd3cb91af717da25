"""Reading a store back to resume it: damaged chunks named and skipped, manifests settled,
unreadable or missing metadata (an array's, the root's) rebuilt from the grid, what sits
where a chunk belongs cleared (``ResultStore.open``).

A chunk is read only where its manifest entry and checksum agree; its cells are computed
again otherwise. Helpers of ``pipeline.sweep.store``, which holds the store's lifecycle.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import xarray as xr
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.storage import MemoryStore

from pipeline.results import Schema, manifest
from pipeline.results.durable import sync_all, write_durably
from pipeline.results.paths import arrays
from pipeline.results.verify import Chunk
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.kind import Grid

log = logging.getLogger("pipeline.sweep")


def _rendered(dataset: xr.Dataset, encoding: dict) -> zarr.Group:
    """The grid's template written to memory: the metadata a store of it has."""
    memory = MemoryStore()
    dataset.to_zarr(memory, mode="w", encoding=encoding, consolidated=False)
    return zarr.open_group(memory, mode="r", use_consolidated=False)


def zarr_array(group: zarr.Group, name: str) -> zarr.Array:
    """The array ``name`` of ``group`` (a store's variables and coordinates are arrays)."""
    found = group[name]
    assert isinstance(found, zarr.Array), f"{name} is an array"
    return found


def _metadata_bytes(node) -> bytes:
    return node.metadata.to_buffer_dict(default_buffer_prototype())["zarr.json"].to_bytes()


def rebuild_root(path: Path, dataset: xr.Dataset, encoding: dict) -> None:
    """Write the root metadata (``zarr.json``: the attributes, the grid's among them) of the
    store at ``path`` as the grid's template has it, leaving its arrays as they are."""
    write_durably({path / "zarr.json": _metadata_bytes(_rendered(dataset, encoding))})
    log.warning(
        "%s: its root metadata (zarr.json) could not be read; rebuilt from the grid, which "
        "its done array names (the runs before this one are no longer listed)",
        path,
    )


def unfinish(path: Path, pairs: set[tuple[int, ...]] | None = None) -> None:
    """Mark the cells of ``pairs`` of the first two dims (None: every cell) not done on disk,
    before anything that stands in for their lost values is written: their ``done`` chunk
    files removed (a missing chunk reads as not done), the folders fsynced. A kill at any
    moment of a repair then leaves them to compute again, never done with a value
    missing."""
    folders = set()
    for key, file in manifest.chunk_files(path, ["done"]).items():
        position = tuple(int(k) for k in key.split("/")[2:4])
        if pairs is None or position in pairs:
            file.unlink()
            folders.add(file.parent)
    sync_all(folders)


def clear_chunk_paths(path: Path, damaged: list[Chunk]) -> None:
    """Make room for the damaged chunks to be written again: an empty folder where a chunk
    belongs is removed (a link, device or FIFO is replaced by the rename that writes the
    chunk). ``ConfigError`` (one line) for a folder that holds something: not ours to
    delete."""
    for chunk in damaged:
        where = path / chunk.file
        if where.is_dir() and not where.is_symlink():
            if any(where.iterdir()):
                raise ConfigError(
                    "store",
                    f"{where} is a folder that holds files where a chunk of {chunk.array} "
                    "belongs: move it out of the store, then run the same command",
                )
            where.rmdir()


def rebuild_metadata(
    path: Path, dataset: xr.Dataset, encoding: dict, names: list[str], missing: set[str]
) -> None:
    """Write the metadata (``zarr.json``) of the arrays ``names`` as the grid's template has
    it, leaving their chunks as they are. An array in ``missing`` (its folder was gone) gets
    a manifest accepting no file at any of its chunks' keys, written first: until its
    chunks are written again, every one is damage (a missing chunk would read as the fill
    value), whatever interrupts the repair."""
    group = _rendered(dataset, encoding)
    for name in sorted(missing):
        array = zarr_array(group, name)
        keys = (array.metadata.encode_chunk_key(p) for p in np.ndindex(array.cdata_shape))
        manifest.write(path, {f"{name}/{key}": [] for key in keys}, [name])
    for name in names:
        write_durably({path / name / "zarr.json": _metadata_bytes(group[name])})


def read_chunks(
    group: zarr.Group, dataset: xr.Dataset, schema: Schema, skip: set[tuple[int, ...]]
) -> tuple[dict[str, np.ndarray], set[tuple[int, ...]]]:
    """Every variable of ``schema`` read chunk by chunk (one chunk per pair of the first two
    dims) but the pairs in ``skip``, and the pairs not read (``skip``, and those with a
    chunk that could not be read): those keep the template's missing values (``done``
    false)."""
    arrays = {name: dataset[name].values.copy() for name in schema.variables}
    shape = arrays["done"].shape[:2]
    unread = set(skip)
    for pair in np.ndindex(shape):
        if pair in unread:
            continue
        try:
            chunk = {name: np.asarray(zarr_array(group, name)[pair]) for name in schema.variables}
        except Exception:  # whatever a damaged chunk makes its codecs raise
            unread.add(pair)
            continue
        for name, values in chunk.items():
            arrays[name][pair] = values
    return arrays, unread


def settled_manifests(path: Path, damaged: list[Chunk]) -> tuple[manifest.Entries, set[str]]:
    """The manifests of the store to resume at ``path`` as they should be, and the arrays
    whose manifest on disk is not: an array without one, or whose one cannot be read, gets
    one from its chunks that read (not ``damaged``); two versions of a chunk accepted (a
    flush was interrupted) become the one on disk."""
    manifests = manifest.load(path)
    uncovered = set(arrays(path)) - manifests.covered
    if uncovered:
        log.log(
            logging.WARNING if manifests.problems else logging.INFO,
            "%s: %s; written again from the chunks that read",
            path,
            "; ".join(
                f"the manifest of {n} cannot be read ({why})"
                for n, why in manifests.problems.items()
            )
            or "it has no manifests yet (written before them)",
        )
    entries = manifests.entries | manifest.scan(path, uncovered, {c.file for c in damaged})
    unsettled = {key.split("/", 1)[0] for key, sums in entries.items() if len(sums) > 1}
    return manifest.settled(entries, path), uncovered | unsettled


def pair_names(grid: Grid, pairs: set[tuple[int, ...]]) -> str:
    """``family=bell, n_states=40; ...``: pairs of the first two dims, by their coordinates."""
    axes = grid.axes()
    return "; ".join(
        ", ".join(f"{dim}={axes[dim][k]}" for dim, k in zip(grid.DIMS, pair, strict=False))
        for pair in sorted(pairs)
    )


def damage_reasons(damaged: list[Chunk], shown: int = 3) -> str:
    """``tv/c/1/0/0/0/0/0/0 (its file is missing), ...``: the first damaged chunks."""
    listed = ", ".join(f"{c.file} ({c.error})" for c in damaged[:shown])
    return listed + (f" and {len(damaged) - shown} more" if len(damaged) > shown else "")
