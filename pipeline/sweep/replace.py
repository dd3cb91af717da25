"""Putting a new store in place of an old one, atomically, and recovering what a kill left.

A new store is written beside its path, as ``.<name>.<pid>.creating``, and fsynced; only
then does it replace what is at the path (``install``): the old store is renamed aside
(``.<name>.<pid>.replaced`` when the new one holds its cells, a grown store;
``.<name>.<pid>.discarded`` when ``overwrite=true`` replaces it), the new one renamed into
place, and the old one deleted last, its ``done`` array first. Every rename is followed by an
fsync of the folder, so a kill or a power loss at any moment leaves a whole store at a known
path: the old one at the path or aside, or the new one at the path.

``recover`` (run by the next sweep of the path, with its lock held) puts back what a killed
replacement left: a store aside with nothing at the path is renamed back (the old store,
whole: the rerun grows or replaces it again); a folder left beside the path is deleted only
where it is provably redundant: it has no ``done`` array (never written, or removed first by
a deletion), or every one of its finished cells is in the sound store at the path with the
same values, or ``overwrite=true`` asked for it to go and a store of another sweep is in its
place. Anything else (a flag or a file it cannot read, a cell the store lacks) is kept and
named in one line, with the commands that keep or drop it.

Each step is a named point (``POINTS``) where a test kills the process: with the environment
variable ``PIPELINE_KILL_AT`` set to a point's name, the process sends itself SIGKILL there.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
from pathlib import Path
from typing import NamedTuple

import numpy as np
import xarray as xr

from pipeline.results import Found, damage, found, kind_of, schema
from pipeline.results.durable import sync
from pipeline.results.manifest import file_problem
from pipeline.results.paths import attributes
from pipeline.results.verify import finished
from pipeline.sweep.config.errors import ConfigError

log = logging.getLogger("pipeline.sweep")

KILL_AT = "PIPELINE_KILL_AT"
"""The environment variable naming the point (``POINTS``) where the process kills itself."""
POINTS = ("written", "synced", "aside", "in_place", "deleting")
"""The steps of putting a new store in place, in order: the new store written aside, then
fsynced (``pipeline.sweep.store``), the old one renamed aside, the new one renamed into
place, the old one's ``done`` array renamed away (its deletion begun)."""
STATES = ("creating", "replaced", "discarded")
"""What a folder beside a store is: a new store being written, an old one whose cells the
new one holds (growth), an old one ``overwrite=true`` replaces."""


def reached(point: str) -> None:
    """A named step is done: the process kills itself here if ``PIPELINE_KILL_AT`` names it
    (a test's fault injection; a no-op otherwise)."""
    if os.environ.get(KILL_AT) == point:
        os.kill(os.getpid(), signal.SIGKILL)


def beside(path: Path, state: str, pid: int | None = None) -> Path:
    """The folder ``.<name>.<pid>.<state>`` beside ``path`` (this process's by default)."""
    return path.with_name(f".{path.name}.{os.getpid() if pid is None else pid}.{state}")


def _delete(folder: Path) -> None:
    """Delete a store folder: its ``done`` array renamed away first (the folder fsynced), so
    a kill part way leaves a folder without one, which holds no finished cell; a link is
    removed, never followed."""
    if folder.is_symlink():
        folder.unlink()
        return
    if (folder / "done").exists():
        os.rename(folder / "done", folder / ".done.deleted")
        sync(folder)
    reached("deleting")
    shutil.rmtree(folder)


def install(new: Path, path: Path, *, grown: bool) -> None:
    """Put the complete, fsynced store ``new`` at ``path``: what is there renamed aside
    (``replaced`` if ``grown``, the new store holding its cells; ``discarded`` otherwise),
    ``new`` renamed into place, the old one deleted last; the folder fsynced after each
    rename."""
    old = None
    if path.exists() or path.is_symlink():
        old = beside(path, "replaced" if grown else "discarded")
        os.rename(path, old)
        sync(path.parent)
        reached("aside")
    os.rename(new, path)
    sync(path.parent)
    reached("in_place")
    if old is not None:
        _delete(old)


def alive(pid: int) -> bool:
    """Whether a process with this PID, other than this one, runs on this host."""
    if pid == os.getpid():
        return False  # an earlier process of the same number: this one is not replacing
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class Leftover(NamedTuple):
    """A folder beside a store that a killed replacement left."""

    folder: Path
    pid: int
    state: str


def leftovers(path: Path, *, locked: bool = False) -> list[Leftover]:
    """The folders beside ``path`` that replacements left, by PID: those whose process is
    gone, or all of them where the caller holds the store's lock (no live process can be
    replacing it then, whatever runs under a reused PID). A link named like one is passed
    over (never followed), with a warning."""
    if not path.parent.is_dir():
        return []
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.({'|'.join(STATES)})")
    left = []
    for entry in path.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if not match:
            continue
        if entry.is_symlink() or not entry.is_dir():
            log.warning("%s: %s is no folder a sweep left; passed over", path, entry.name)
        elif locked or not alive(int(match[1])):
            left.append(Leftover(entry, int(match[1]), match[2]))
    return sorted(left, key=lambda leftover: leftover.pid)


def _equal_where(ours: xr.DataArray, kept: xr.DataArray, done: xr.DataArray) -> bool:
    """Whether two variables over the same coordinates hold the same values (NaN equal to
    NaN) in every finished cell."""
    cell = done.any([dim for dim in done.dims if dim not in ours.dims])
    mask = cell.broadcast_like(ours).transpose(*ours.dims).values
    a, b = ours.values[mask], kept.transpose(*ours.dims).values[mask]
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


UNPROVED = -1
"""``_unkept`` of a folder that cannot be proved redundant for want of reading it."""


def _unkept(folder: Path, path: Path) -> int:
    """How many finished cells of the store in ``folder`` the store at ``path`` lacks, or
    holds with other values in a variable both have: 0 where ``folder`` is redundant (it has
    no ``done`` array, or none of its flags is set, or every finished cell is kept);
    ``UNPROVED`` where a file of ``folder`` is no store's file, a flag cannot be read, or the
    store at ``path`` is damaged. Reads every file within its bound."""
    if not (folder / "done").exists():
        return 0
    files = [f for f in folder.rglob("*") if f.is_symlink() or not f.is_dir()]
    n = None if any(file_problem(f) for f in files) else finished(folder)
    if not n:
        return UNPROVED if n is None else 0
    if found(path) is not Found.RESULTS or damage(path):
        return n
    try:
        done = xr.open_zarr(folder, consolidated=False, chunks=None)["done"].load()
        cells = {  # the coordinates of the finished cells, along each dim
            dim: done[dim].values[done.any([d for d in done.dims if d != dim]).values]
            for dim in done.dims
        }
        old = xr.open_zarr(folder, consolidated=False, chunks=None).sel(cells)
        new = xr.open_zarr(path, consolidated=False, chunks=None)
        done = done.sel(cells)
        if not bool(new.done.sel(cells).where(done, True).all()):
            return n
        for name in set(schema(kind_of(old.attrs)).variables) & set(old.data_vars):
            ours = old[name]
            kept = new[name].sel({dim: ours[dim].values for dim in ours.dims})
            if not _equal_where(ours, kept, done):
                return n
    except Exception:  # a cell or a variable the stores cannot give: unproved
        return n
    return 0


def _replaced_by_another(leftover: Leftover, path: Path) -> bool:
    """Whether ``leftover`` is a store ``overwrite=true`` discarded and a store of another
    sweep stands at ``path``: its replacement, in place."""
    if leftover.state != "discarded" or found(path) is not Found.RESULTS:
        return False
    stored, discarded = attributes(path) or {}, attributes(leftover.folder) or {}
    return stored.get("grid") != discarded.get("grid")


def recover(path: Path, *, locked: bool = False) -> None:
    """Put back what killed replacements of the store at ``path`` left (see the module's
    docstring): a whole store aside put back where nothing is at ``path``; folders proved
    redundant deleted. ``locked``: the caller holds the store's lock (``leftovers``).
    ``ConfigError`` (one line) for a folder that cannot be proved redundant: it is kept, and
    the line gives the commands that keep or drop it."""
    left = leftovers(path, locked=locked)
    aside = [leftover for leftover in left if leftover.state != "creating"]
    if aside and not (path.exists() or path.is_symlink()):
        if len(aside) > 1:
            raise ConfigError(
                "store",
                f"{path} is missing and {len(aside)} stores beside it were left by killed "
                f"sweeps ({', '.join(a.folder.name for a in aside)}): rename the one to keep "
                f"to {path.name}, then run the same command",
            )
        back = aside[0]
        os.rename(back.folder, path)
        sync(path.parent)
        log.warning(
            "%s: put back from %s, where a sweep killed while replacing it had put it",
            path,
            back.folder.name,
        )
        left.remove(back)
    for leftover in left:
        replaced = _replaced_by_another(leftover, path)
        unkept = 0 if replaced else _unkept(leftover.folder, path)
        if unkept:
            what = (
                "flags or files that cannot be read"
                if unkept == UNPROVED
                else f"{unkept} finished cells"
            )
            raise ConfigError(
                "store",
                f"{leftover.folder} holds {what}, not proved to be in {path} (a sweep was "
                f"killed while replacing it): to keep them, rename {path} aside and "
                f"{leftover.folder.name} to {path.name}; to drop them, remove "
                f"{leftover.folder.name}; then run the same command",
            )
        _delete(leftover.folder)
        log.info(
            "%s: removed %s, left by a sweep that was killed (%s)",
            path,
            leftover.folder.name,
            "overwrite=true replaced it" if replaced else "no finished cell the store lacks",
        )
