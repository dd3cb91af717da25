"""``analyze``: any sweep's store to figures and a Markdown report, by the store's kind."""

from __future__ import annotations

import tempfile
from pathlib import Path

import xarray as xr

from pipeline.analysis.base import Analysis
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
from pipeline.results.schema import text_table
from pipeline.results.verify import ROOT, Chunk, chunks


def default_output(store: Path) -> Path:
    """Where ``analyze`` writes by default: ``<store's folder>/<store name>_report/``."""
    store = Path(store)
    return store.parent / f"{store.stem}_report"


class OutputError(ValueError):
    """The folder for the report and figures cannot be written: ``out`` is it, ``why`` says
    what stands in the way."""

    def __init__(self, out: Path, why: str):
        super().__init__(f"cannot write the report in {out}: {why}")
        self.out, self.why = out, why


def _refusal(folder: Path) -> str | None:
    """Why no file can be created (and removed) in the existing ``folder``, or None: tried,
    not ``os.access``, which a read-only or virtual file system (``/proc``) answers wrongly."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as error:
        return f"{folder} refuses new files ({error.strerror or type(error).__name__})"
    return None


def check_output(out: Path) -> None:
    """Raise ``OutputError`` unless the report and figures can be written in ``out``: a
    folder, or a path whose nearest existing folder takes new files (``out`` is made there).
    Creates nothing, so a refusal leaves no trace."""
    out = Path(out)
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "it is" if existing == out else f"{existing} is"
        raise OutputError(out, f"{what} a file, not a folder")
    why = _refusal(existing)
    if why:
        raise OutputError(out, why)


def _source(ds: xr.Dataset) -> Path | None:
    """The store a Dataset was opened from (``pipeline.open_results`` records it)."""
    source = ds.encoding.get("source")
    return Path(source) if source else None


def _trusted(store: Path) -> xr.Dataset:
    """The results of ``store``, lazily; ``StoreError`` (one line) naming what of it cannot
    be trusted."""
    damaged = damage(store)
    if damaged:
        raise StoreError(damage_line(store, damaged))
    return open_results(store)


def analyze(results, out=None) -> Analysis:
    """Write the figures and the Markdown report of a sweep's results; what it wrote.

    ``results`` is a store's path or its Dataset (as ``pipeline.sweep.run`` or
    ``pipeline.open_results`` return it). ``out`` defaults to a folder next to the store
    (``default_output``); a Dataset with no store behind it needs one. A store still being
    written, interrupted or without timings is reported as far as it is finished. Raises
    ``StoreError`` (one line) where the path holds no results store this pipeline reads,
    or one with a chunk, an array's metadata or manifest that cannot be trusted (named);
    ``OutputError`` (one line) where ``out`` cannot be written: checked before a chunk is
    read or a figure drawn (``check_output``), and caught where the files are written.
    """
    if isinstance(results, xr.Dataset):
        store = _source(results)
        if out is None and store is None:
            raise ValueError("out: this Dataset has no store behind it; give out=<folder>")
    else:
        store = Path(results)
        require_results(store, damaged=True)  # a lost root is named with the damage
    if out is None:
        assert store is not None, "a Dataset without a store raised above"
        out = default_output(store)
    else:
        out = Path(out)
    check_output(out)
    ds = results if isinstance(results, xr.Dataset) else _trusted(Path(results))
    write = KINDS.lookup(kind_of(ds.attrs)).load("report")
    ds = ds.load()
    try:  # the folder may have changed since check_output
        out.mkdir(parents=True, exist_ok=True)
        return write(ds, store or out, out)
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        raise OutputError(out, where + (error.strerror or type(error).__name__)) from None


METADATA = "zarr.json"

NO_MANIFESTS = (
    "{store} has no manifests (written before them): each chunk is checked by its own "
    "checksum, not against its position; the next run of its sweep writes them"
)


def _damaged(chunk: Chunk) -> str:
    """Where a damaged chunk is, or which file of its array cannot be read and why."""
    if chunk.position is None and chunk.file == chunk.array:
        return f"the array: {chunk.error}"
    if chunk.position is None:
        return f"{Path(chunk.file).name}: {chunk.error}"
    return chunk.where or str(chunk.position)


def verify(store) -> tuple[str, bool]:
    """The whole store at ``store`` checked (``pipeline.results.verify.chunks``: its root
    metadata, every array its kind requires, every chunk read within its bound and held
    against its array's manifest): a table, per array, of its chunks and those that cannot
    be trusted (where, or which of its files cannot be read, or that it is missing, and
    why), and whether all are sound. A store whose root metadata is lost is checked too."""
    require_results(store, damaged=True)
    by_array: dict[str, list[Chunk]] = {}
    for chunk in chunks(store):
        by_array.setdefault(chunk.array, []).append(chunk)
    rows = []
    for name, found in by_array.items():
        data = [c for c in found if c.position is not None]
        readable = not any(c.position is None and c.file.endswith(METADATA) for c in found)
        readable = readable and name != ROOT and (Path(store) / name).is_dir()
        rows.append(
            [
                name or "(root)",
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
