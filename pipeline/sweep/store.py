"""The results store: one zarr store per sweep, an xarray Dataset over the grid.

Only one sweep writes a store (it holds ``pipeline.sweep.lock.StoreLock``), from its
client process: a store is created (or grown) aside from a template, fsynced, and put in
place of the old one by renames that always leave a whole store at a known path
(``pipeline.sweep.replace``: the next run puts back, or deletes where provably redundant,
what a kill left); the client keeps a mirror of every variable in memory, and ``flush`` writes whole
chunks of the pairs of the first two dims whose cells changed, the ``done`` mask last.
Every write is durable and every chunk listed in the store's manifest before it is renamed
into place (``pipeline.results.durable``, ``pipeline.results.manifest``), so an interrupted
flush, or a power loss, leaves every chunk either old or new and matching the manifest;
cells whose ``done`` flag did not reach the disk are simply computed again on the next run.

Every chunk carries a CRC32C checksum and the manifest ties it to its position: a chunk
damaged, deleted, copied from elsewhere or replaced by what no chunk can be (a link, a
device, a folder, a file too large) is named instead of read, and resuming computes its
cells again; metadata that cannot be read (an array's, the root's) is rebuilt from the grid,
and an array that is missing is rebuilt empty, its cells computed again. A full disk stops
the sweep with one line (``ConfigError``), keeping what reached the disk.

Read it with plain xarray: ``xr.open_zarr(path)``. What a new store holds is
``pipeline.sweep.layout``'s. This module is longer than most (about 430 lines) because it is
one class and the checks its ``check`` makes: every write of a store's life (create, grow,
resume, flush) in one place, where the order of those writes, on which a kill's safety
rests, is read whole.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import cast

import numpy as np
import xarray as xr
import zarr

from pipeline.results import Found, Schema, Variable, damage, found, manifest
from pipeline.results.durable import DurableStore, is_temporary, sync_tree, write_atomically
from pipeline.results.paths import identity, problem, root_problem
from pipeline.results.verify import finished, structure
from pipeline.sweep import repair, replace
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.kind import Grid
from pipeline.sweep.layout import FILL, identify, template

log = logging.getLogger("pipeline.sweep")


def _consolidate(store) -> None:
    """Refresh the consolidated metadata, so ``xr.open_zarr`` opens the store quietly."""
    with warnings.catch_warnings():
        # zarr notes that consolidated metadata is not yet part of the v3 spec.
        warnings.simplefilter("ignore", category=UserWarning)
        zarr.consolidate_metadata(store)


def _difference(stored: str, wanted: str) -> str:
    old, new = json.loads(stored), json.loads(wanted)
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            return f"{key} is {old.get(key)} in the store but {new.get(key)} in this run"
    return "the grids differ"


@contextlib.contextmanager
def _disk_space(path: Path):
    """A full disk (or quota) while writing the store at ``path``: ``ConfigError``, one line."""
    try:
        yield
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise ConfigError(
            "store",
            f"{path}: the disk is full ({error.strerror}); the finished cells that reached "
            "the disk are kept: free some space, then run the same command again",
        ) from None


def _refuse_to_discard(path: Path) -> None:
    """``overwrite=true`` on a store whose cells this run could keep: ``ConfigError`` (one
    line) if it holds a finished cell, or flags that cannot all be read."""
    n = finished(path)
    if n == 0:
        return
    held = f"{n:,} finished cells" if n else "finished cells (its done flags cannot all be read)"
    raise ConfigError(
        "overwrite",
        f"{path} holds {held} that this run keeps; overwrite=true never deletes them: run "
        "without it to resume (damaged cells are computed again), or remove the store "
        "yourself to compute every cell again",
    )


def _check_rootless(path: Path, what: Found, grid: Grid, overwrite) -> bool:
    """``ResultStore.check`` of a store whose root metadata is lost or cannot be read:
    resumed (its root rebuilt from the grid) where its ``done`` array keeps this grid's
    fingerprint (``overwrite`` refused while it holds finished cells); replaced with
    ``overwrite`` where it holds no finished cell; refused otherwise, in one line."""
    kept, why = identity(path)
    if kept == grid.fingerprint():
        if overwrite:
            _refuse_to_discard(path)
        return not overwrite
    n = finished(path)
    if overwrite and n == 0:
        return False
    if kept is None:
        other = f"its identity cannot be read either ({why})"
    elif grid.grows(json.loads(kept)):
        other = "and this run would grow it: run the command that made it first"
    else:
        other = f"and it is another sweep's ({_difference(kept, grid.fingerprint())})"
    held = {0: "no finished cell", None: "done flags that cannot all be read"}.get(
        n, f"{n:,} finished cells"
    )
    if n == 0:
        advice = "give another store=, or overwrite=true to replace it"
    elif kept is None:
        advice = "give another store="
    else:
        advice = "run the command that made it to repair it"
    raise ConfigError("store", f"{path} {what.value}, {other}; it holds {held}: {advice}")


class ResultStore:
    """The store of one sweep, with an in-memory mirror of every cell variable.

    Use ``ResultStore.open`` to create or resume; ``record`` and
    ``record_failure`` update the mirror, ``flush`` writes it. Any kind's store: the
    ``schema`` names the variables, the grid the cells (``cells``, ``index``,
    ``fingerprint`` and ``DIMS``, whose first two dims chunk the store).
    """

    def __init__(
        self,
        path: Path,
        schema: Schema,
        grid: Grid,
        group: zarr.Group,
        arrays: dict[str, np.ndarray],
        entries: manifest.Entries,
    ):
        self.path, self.schema, self.grid = path, schema, grid
        self.variables: dict[str, Variable] = schema.variables
        self._group, self._arrays = group, arrays
        self._dirty: set[tuple[int, ...]] = set()
        self._entries = entries
        """The manifests of the store's arrays: the chunks as they are on disk."""
        self._behind: set[str] = set()
        """Arrays whose manifest on disk is behind ``_entries``: missing (a store from before
        manifests), or still accepting two versions of a chunk (a flush was interrupted)."""

    @property
    def _files(self) -> DurableStore:
        files = self._group.store
        assert isinstance(files, DurableStore), "opened on a DurableStore"
        return files

    @staticmethod
    def check(path: Path, schema: Schema, grid: Grid, *, overwrite: bool = False) -> bool:
        """Whether ``path`` holds a store of ``grid`` to resume (or to grow); reads, never
        writes.

        Raises ``ConfigError`` (one line, the words ``analyze`` uses) when ``path`` holds
        something else: anything but a results store always; a store of an older layout or
        of another grid unless ``overwrite`` replaces it; a symbolic link (the renames that
        put a store in place would replace the link, not its target). A store of ``grid``,
        or one that ``grid`` grows, is resumed, whatever its damage (repaired: see
        ``open``), and so is one whose root metadata is lost but whose ``done`` array keeps
        this grid's fingerprint; ``overwrite`` never deletes the finished cells of such a
        store: it is refused while there are any.
        """
        path = Path(path)
        if path.is_symlink():
            raise ConfigError(
                "store",
                f"{path} is a symbolic link (to {os.readlink(path)}): a store is put in place "
                f"by renames, which would replace the link; give store={path.resolve()}",
            )
        what = found(path)
        if what in (Found.MISSING, Found.EMPTY):
            return False
        if what in (Found.ROOTLESS, Found.UNREADABLE):
            return _check_rootless(path, what, grid, overwrite)
        if what is Found.OLD and overwrite:
            return False
        if what is not Found.RESULTS:
            raise ConfigError("store", problem(path, what))
        # the fingerprint this pipeline writes: a str
        stored = cast(str, zarr.open_group(path, mode="r", use_consolidated=False).attrs["grid"])
        if stored == grid.fingerprint() or grid.grows(json.loads(stored)):
            if overwrite:
                _refuse_to_discard(path)
                return False
            return True
        if overwrite:
            return False
        raise ConfigError(
            "store",
            f"{path} holds a different sweep: "
            f"{_difference(stored, grid.fingerprint())}; choose "
            "another store= or pass overwrite=true to replace it",
        )

    @classmethod
    def open(
        cls, path: Path, schema: Schema, grid: Grid, attrs: dict, *, overwrite: bool = False
    ) -> ResultStore:
        """Resume the store of ``grid`` at ``path``, grow it, or create it (see ``check``),
        after putting back what killed replacements left beside it (``replace.recover``).

        Resuming rebuilds from the grid the root metadata and the metadata of arrays that
        cannot be read (or are missing: rebuilt empty, their cells computed again), then
        reads the store chunk by chunk: the cells of a chunk that cannot be trusted (see
        ``pipeline.results.damage``) are not done (they are computed again, and the chunk
        rewritten at the next flush), and coordinates that cannot be trusted are rewritten
        from the grid. ``ConfigError`` (one line) if the disk is full."""
        path = Path(path)
        with _disk_space(path):
            replace.recover(path)
            if not cls.check(path, schema, grid, overwrite=overwrite):
                return cls._create(path, schema, grid, attrs)
            if root_problem(path):
                repair.rebuild_root(path, *template(schema, grid, {"runs": [], **attrs}))
            if zarr.open_group(path, mode="r").attrs["grid"] != grid.fingerprint():
                cls._grow(path, schema, grid)
            return cls._resume(path, schema, grid)

    @classmethod
    def _grow(cls, path: Path, schema: Schema, grid: Grid) -> None:
        """Make the store at ``path`` the store of ``grid``, which holds every cell of the
        store's grid and more (``Grid.grows``): every stored value placed at its coordinates
        in the larger grid, to the last bit, the new cells not done; written aside and put
        in place as a new store is, the old one aside until the grown one is in place. A
        damaged store is repaired first, by the command that made it."""
        damaged = damage(path)
        if damaged:
            raise ConfigError(
                "store",
                f"{path} is damaged ({repair.damage_reasons(damaged)}); run the command that "
                "made it to repair it, then this one to grow it",
            )
        old = xr.open_zarr(path, consolidated=False, chunks=None).load()
        kept = {k: v for k, v in old.attrs.items() if k not in ("grid", "format", "kind")}
        new, _ = template(schema, grid, kept)
        for name, variable in schema.variables.items():
            placed = old[name].reindex(
                {dim: new[dim].values for dim in variable.dims}, fill_value=FILL[variable.dtype]
            )
            new[name] = placed.astype(new[name].dtype)
        identify(new, grid)
        log.info("%s: grown to the grid of this run, its %d cells kept", path, int(old.done.sum()))
        cls._create(path, schema, grid, kept, values=new)

    @classmethod
    def _resume(cls, path: Path, schema: Schema, grid: Grid) -> ResultStore:
        """``open`` of a store ``check`` found to resume, its root metadata readable."""
        for file in path.rglob("*"):
            if is_temporary(file.name):  # of a flush that was interrupted
                file.unlink(missing_ok=True)
        dataset, encoding = template(schema, grid, {})
        broken = {  # arrays whose metadata is missing, cannot be read or does not fit
            c.array: c.error
            for c in structure(path)
            if c.array in dataset and not c.file.endswith(manifest.MANIFEST)
        }
        missing = {name for name in broken if not (path / name).is_dir()}
        lost = missing & set(schema.variables)
        if lost:
            repair.unfinish(path)
        if broken:
            repair.rebuild_metadata(path, dataset, encoding, sorted(broken), missing)
            log.warning(
                "%s: rebuilt from the grid: %s",
                path,
                "; ".join(
                    f"{name}, missing: its cells are computed again"
                    if name in lost
                    else f"the metadata of {name} ({why})"
                    for name, why in sorted(broken.items())
                ),
            )
        damaged = [c for c in damage(path) if c.position is not None]
        skip = {
            c.position[:2]
            for c in damaged
            if c.position is not None and c.array in schema.variables
        }
        repair.unfinish(path, skip)
        repair.clear_chunk_paths(path, damaged)
        group = zarr.open_group(store=DurableStore(path), mode="r+", use_consolidated=False)
        if identity(path)[0] != grid.fingerprint():  # a store from before it kept it there
            group["done"].attrs["grid"] = grid.fingerprint()
        if lost:
            skip |= set(np.ndindex(dataset["done"].shape[:2]))
        arrays_read, unread = repair.read_chunks(group, dataset, schema, skip)
        entries, behind = repair.settled_manifests(path, damaged)
        store = cls(path, schema, grid, group, arrays_read, entries)
        store._behind = behind
        if unread and not lost:
            log.warning(
                "%s: chunks of %s cannot be read; their cells are computed again: %s",
                path,
                repair.pair_names(grid, unread),
                repair.damage_reasons([c for c in damaged if c.array in schema.variables])
                or "unreadable",
            )
        coordinates = {c.array for c in damaged if c.array in dataset} - set(schema.variables)
        coordinates |= set(broken) - set(schema.variables)
        for name in sorted(coordinates):
            repair.zarr_array(group, name)[...] = dataset[name].values
            log.warning("%s: %s could not be read; rewritten from the grid", path, name)
        store._dirty = unread  # rewritten at once, not done (``repair.unfinish``)
        store.flush()
        _consolidate(store._files)  # of the metadata as it now is
        return store

    @classmethod
    def _create(
        cls, path: Path, schema: Schema, grid: Grid, attrs: dict, values: xr.Dataset | None = None
    ) -> ResultStore:
        """A new store: written beside ``path``, fsynced and put in place of what is there
        (what ``check`` allowed to replace), the old store renamed aside until the new one
        is in place (``replace.install``), so no interruption leaves a half-made store or
        loses the old one. ``values``: the Dataset to write instead of the grid's empty one
        (a grown store, which holds the old one's cells)."""
        dataset, encoding = template(schema, grid, {"runs": [], **attrs})
        if values is not None:
            dataset = values
        aside = replace.beside(path, "creating")
        try:
            dataset.to_zarr(aside, mode="w", encoding=encoding, consolidated=False)
            replace.reached("written")
            _consolidate(aside)
            manifest.write(aside, manifest.scan(aside), list(dataset.variables))
            sync_tree(aside)
            replace.reached("synced")
        except BaseException:
            shutil.rmtree(aside, ignore_errors=True)
            raise
        replace.install(aside, path, grown=values is not None)
        arrays_made = {name: dataset[name].values.copy() for name in schema.variables}
        group = zarr.open_group(store=DurableStore(path), mode="r+", use_consolidated=False)
        return cls(path, schema, grid, group, arrays_made, manifest.load(path).entries)

    def todo(self) -> list:
        """The cells of the grid not yet done, in grid order."""
        done = self._arrays["done"]
        return [cell for cell in self.grid.cells() if not done[self.grid.index(cell)]]

    @property
    def n_done(self) -> int:
        return int(self._arrays["done"].sum())

    @property
    def n_failed(self) -> int:
        return int(self._arrays["failed"].sum())

    def record(self, cell, values: dict) -> None:
        """Put a finished cell's ``values`` (variable name -> value) in the mirror."""
        index = dict(zip(self.grid.DIMS, self.grid.index(cell), strict=True))
        for name, value in values.items():
            where = tuple(index[d] for d in self.variables[name].dims if d in index)
            self._arrays[name][where] = value
        self._set_status(cell, done=True, failed=False, error="")

    def record_failure(self, cell, message: str) -> None:
        self._set_status(cell, done=False, failed=True, error=message)

    def _set_status(self, cell, **status) -> None:
        position = self.grid.index(cell)
        for name, value in status.items():
            self._arrays[name][position] = value
        self._dirty.add(position[:2])

    def flush(self) -> None:
        """Write the chunks of every changed pair of the first two dims, ``done`` last, and
        the manifest that lists them (``_commit``). ``ConfigError`` (one line) if the disk
        is full: what an earlier flush wrote stays, and the pairs stay to write."""
        with _disk_space(self.path):
            try:
                for pair in sorted(self._dirty):
                    for name in self.variables:
                        repair.zarr_array(self._group, name)[pair] = self._arrays[name][pair]
                self._commit()
            except BaseException:
                self._files.discard()
                raise
        self._dirty.clear()

    def _commit(self) -> None:
        """Put the staged chunks in place: the manifests of their arrays accepting their old
        and new bytes first (durably, with the chunks' fsyncs), then the chunks, then the
        manifests with the new bytes only (atomically; a power loss may leave the first,
        which still accepts every chunk on disk). Also writes the manifests ``_behind``."""
        staged = dict(self._files.staged)
        if not staged and not self._behind:
            return
        touched = {key.split("/", 1)[0] for key in staged}
        pending = dict(self._entries)
        for key, chunk in staged.items():
            pending[key] = list(dict.fromkeys([*pending.get(key, [None]), chunk.checksum]))
        self._files.publish(manifest.files(self.path, pending, sorted(touched | self._behind)))
        for key, chunk in staged.items():
            pending[key] = [chunk.checksum]
        self._entries = {key: sums for key, sums in pending.items() if sums != [None]}
        write_atomically(manifest.files(self.path, self._entries, sorted(touched)))
        self._behind = set()

    def add_run(self, run: dict) -> None:
        """Append what this run is (its start, config, commit, workers: JSON values) to the
        store's ``runs`` attribute, the list of every run that wrote it. A store written
        before the list counted its runs: that count opens the list."""
        runs = self._group.attrs.get("runs", [])
        if not isinstance(runs, list):
            runs = [{"earlier_runs": int(cast(int, runs))}]  # a count, before the list
        self.update_attrs(runs=[*runs, run])

    def update_attrs(self, **attrs) -> None:
        """Set Dataset attributes (and refresh the consolidated metadata)."""
        with _disk_space(self.path):
            self._group.attrs.update(attrs)
            _consolidate(self._files)
