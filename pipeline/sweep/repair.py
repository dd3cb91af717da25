"""Reading a store back to resume it: what a killed creation left removed, damaged chunks
named and skipped, manifests settled, unreadable metadata rebuilt (``ResultStore.open``).

A chunk is read only where its manifest entry and checksum agree; its cells are computed
again otherwise. Helpers of ``pipeline.sweep.store``, which holds the store's lifecycle.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

import numpy as np
import xarray as xr
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.storage import MemoryStore

from pipeline.results import Schema, manifest
from pipeline.results.durable import write_durably
from pipeline.results.paths import Chunk, arrays
from pipeline.sweep.kinds.base import Grid

log = logging.getLogger("pipeline.sweep")


def alive(pid: int) -> bool:
    """Whether a process with this PID runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_creations(path: Path) -> None:
    """Remove what creators of ``path`` that died left beside it: ``.<name>.<pid>.creating``
    of a PID that no process on this host has."""
    if not path.parent.is_dir():
        return
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.creating")
    for entry in path.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and int(match[1]) != os.getpid() and not alive(int(match[1])):
            shutil.rmtree(entry, ignore_errors=True)
            log.info("%s: removed %s, left by a creation that was killed", path, entry.name)


def rebuild_metadata(path: Path, dataset: xr.Dataset, encoding: dict, names: list[str]) -> None:
    """Write the metadata (``zarr.json``) of the arrays ``names`` as the grid's template has
    it, leaving their chunks as they are."""
    memory = MemoryStore()
    dataset.to_zarr(memory, mode="w", encoding=encoding, consolidated=False)
    group = zarr.open_group(memory, mode="r", use_consolidated=False)
    for name in names:
        metadata = group[name].metadata.to_buffer_dict(default_buffer_prototype())
        write_durably({path / name / "zarr.json": metadata["zarr.json"].to_bytes()})


def read_chunks(
    group: zarr.Group, dataset: xr.Dataset, schema: Schema, skip: set[tuple[int, int]]
) -> tuple[dict[str, np.ndarray], set[tuple[int, int]]]:
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
            chunk = {name: np.asarray(group[name][pair]) for name in schema.variables}
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


def pair_names(grid: Grid, pairs: set[tuple[int, int]]) -> str:
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
