"""``analyze``: any sweep's store to figures and a Markdown report, by the store's kind."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from pipeline.analysis.figures import Analysis
from pipeline.results import (
    KINDS,
    StoreError,
    damage,
    damage_line,
    kind_of,
    manifest,
    open_results,
    require_results,
)
from pipeline.results.base import text_table
from pipeline.results.paths import Chunk, chunks


def default_output(store: Path) -> Path:
    """Where ``analyze`` writes by default: ``<store's folder>/<store name>_report/``."""
    store = Path(store)
    return store.parent / f"{store.stem}_report"


def _source(ds: xr.Dataset) -> Path | None:
    """The store a Dataset was opened from (``pipeline.open_results`` records it)."""
    source = ds.encoding.get("source")
    return Path(source) if source else None


def analyze(results, out=None) -> Analysis:
    """Write the figures and the Markdown report of a sweep's results; what it wrote.

    ``results`` is a store's path or its Dataset (as ``pipeline.sweep.run`` or
    ``pipeline.open_results`` return it). ``out`` defaults to a folder next to the store
    (``default_output``); a Dataset with no store behind it needs one. A store still being
    written, interrupted or without timings is reported as far as it is finished. Raises
    ``StoreError`` (one line) where the path holds no results store this pipeline reads,
    or one with a chunk, an array's metadata or manifest that cannot be trusted (named).
    """
    if isinstance(results, xr.Dataset):
        ds, store = results, _source(results)
        if out is None and store is None:
            raise ValueError("out: this Dataset has no store behind it; give out=<folder>")
    else:
        store = Path(results)
        require_results(store)
        damaged = damage(store)
        if damaged:
            raise StoreError(damage_line(store, damaged))
        ds = open_results(store)
    out = Path(out) if out is not None else default_output(store)
    out.mkdir(parents=True, exist_ok=True)
    write = KINDS.lookup(kind_of(ds.attrs)).load("report")
    return write(ds.load(), store or out, out)


METADATA = "zarr.json"

NO_MANIFESTS = (
    "{store} has no manifests (written before them): each chunk is checked by its own "
    "checksum, not against its position; the next run of its sweep writes them"
)


def _damaged(chunk: Chunk) -> str:
    """Where a damaged chunk is, or which file of its array cannot be read and why."""
    if chunk.position is None:
        return f"{Path(chunk.file).name}: {chunk.error}"
    return chunk.where or str(chunk.position)


def verify(store) -> tuple[str, bool]:
    """Every chunk of the store at ``store`` read and held against its array's manifest: a
    table, per array, of its chunks and those that cannot be trusted (where, or which of
    its files cannot be read and why), and whether all are sound."""
    require_results(store)
    by_array: dict[str, list[Chunk]] = {}
    for chunk in chunks(store):
        by_array.setdefault(chunk.array, []).append(chunk)
    rows = []
    for name, found in by_array.items():
        data = [c for c in found if c.position is not None]
        readable = not any(c.position is None and c.file.endswith(METADATA) for c in found)
        rows.append(
            [
                name,
                str(len(data)) if readable else "?",
                str(sum(not c.error for c in data)) if readable else "?",
                "; ".join(_damaged(c) for c in found if c.error) or "-",
            ]
        )
    sound = all(not c.error for found in by_array.values() for c in found)
    table = text_table(["array", "chunks", "sound", "damaged (where)"], rows)
    if not manifest.load(store).covered:
        table += "\n" + NO_MANIFESTS.format(store=store)
    return table, sound
