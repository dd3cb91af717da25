"""What a path holds, in the words the sweep and ``analyze`` share.

``found(path)`` tells a results store from everything else a store path can hold, so both
say the same thing for the same case (``problem``), and the metadata of a store's root and
arrays is read here, each file within its bound (``pipeline.results.manifest.read_bounded``);
which chunks are sound is ``pipeline.results.verify``.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path

from pipeline.results.base import FORMAT, StoreError
from pipeline.results.durable import is_temporary
from pipeline.results.manifest import read_bounded
from pipeline.results.registry import known_names

METADATA = "zarr.json"


class Found(enum.Enum):
    """What a store path holds."""

    MISSING = "does not exist"
    EMPTY = "is an empty directory"
    FILE = "is a file"
    FOLDER = "is a directory but no zarr store"
    FOREIGN = "is a zarr store of another program"
    ROOTLESS = "is a results store that has lost its root metadata (zarr.json)"
    UNREADABLE = "is a results store whose root metadata (zarr.json) cannot be read"
    OLD = "is a results store of an older layout"
    RESULTS = "is a results store"


REBUILD_ROOT = (
    "run the same sweep command again to rebuild it from the grid, keeping every chunk that "
    "verifies"
)
WHAT_TO_DO = {
    Found.MISSING: "run its sweep first, or give the path of a sweep's results store",
    Found.EMPTY: "run its sweep first, or give the path of a sweep's results store",
    Found.FILE: "a store is a directory: give another path (store=)",
    Found.FOLDER: "give another path (store=): a sweep never writes into a folder that holds "
    "something else",
    Found.FOREIGN: "give another path (store=): overwrite=true never replaces another program's "
    "data",
    Found.ROOTLESS: REBUILD_ROOT,
    Found.UNREADABLE: REBUILD_ROOT,
    Found.OLD: "this pipeline cannot keep its cells: run its sweep again with overwrite=true "
    "to replace it",
}
"""What the sweep says to do about each thing a store path can hold."""
TO_READ = {
    Found.FILE: "give the path of a sweep's results store (a folder)",
    Found.FOLDER: "give the path of a sweep's results store",
    Found.FOREIGN: "it was not written by a sweep of this pipeline: give the path of one",
    Found.OLD: "this pipeline reads no other layout: run its sweep again with overwrite=true to "
    "replace it",
}
"""What ``analyze`` says instead, where reading differs from writing."""


def attributes(path: Path) -> dict | None:
    """The root group's attributes, or None where ``path`` has no readable root metadata."""
    try:
        text = read_bounded(path / METADATA)
        metadata = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(metadata, dict) or metadata.get("node_type") != "group":
        return None
    attributes = metadata.get("attributes", {})
    return attributes if isinstance(attributes, dict) else None


def found(path) -> Found:
    """What ``path`` holds (reads a few small files, each within its bound; writes nothing)."""
    path = Path(path)
    if not path.exists():
        return Found.MISSING
    if not path.is_dir():
        return Found.FILE
    names = {entry.name for entry in path.iterdir() if not is_temporary(entry.name)}
    if not names:
        return Found.EMPTY
    ours = names <= known_names()
    if METADATA not in names:
        return Found.ROOTLESS if ours else Found.FOLDER
    attrs = attributes(path)
    if attrs is not None and "grid" in attrs:
        return Found.OLD if attrs.get("format", 1) != FORMAT else Found.RESULTS
    if not ours:
        return Found.FOREIGN
    # only our arrays: a root that lost its attributes, or cannot be read
    return Found.ROOTLESS if attrs == {} else Found.UNREADABLE


def _stores_below(folder: Path, depth: int = 2, shown: int = 4) -> list[str]:
    """Results stores in ``folder`` and its subfolders, ``depth`` levels down at most."""
    stores: list[str] = []
    level = [folder]
    for _ in range(depth):
        level = sorted(p for f in level for p in f.iterdir() if p.is_dir() and p.name[0] != ".")
        stores += [str(p) for p in level if found(p) is Found.RESULTS]
        level = [p for p in level if found(p) is not Found.RESULTS]
    return stores[:shown]


def problem(path, what: Found, *, reading: bool = False) -> str:
    """The one line saying what ``path`` holds and what to do about it: to the sweep, or to a
    reader (``reading``: ``analyze``), which is told of the stores a folder holds."""
    if what is Found.OLD:
        layout = (attributes(Path(path)) or {}).get("format", 1)
        detail = (
            f" (layout {layout}; this pipeline reads layout {FORMAT}, with the method and "
            "setting dims: see the README's release notes)"
        )
    else:
        detail = ""
    advice = TO_READ.get(what, WHAT_TO_DO[what]) if reading else WHAT_TO_DO[what]
    if reading and what is Found.FOLDER:
        inside = _stores_below(Path(path))
        if inside:
            advice = f"it holds the results stores {', '.join(inside)}: give one of them"
    return f"{path} {what.value}{detail}; {advice}"


def require_results(path, *, damaged: bool = False) -> dict:
    """The attributes of the results store at ``path``; ``StoreError`` (in a reader's words)
    for anything else. ``damaged``: a results store whose root metadata is lost or cannot be
    read is accepted too (its attributes: {}), for a reader that names the damage."""
    what = found(path)
    if damaged and what in (Found.ROOTLESS, Found.UNREADABLE):
        return {}
    if what is not Found.RESULTS:
        raise StoreError(problem(path, what, reading=True))
    attrs = attributes(Path(path))
    assert attrs is not None, "found read them"
    return attrs


def _metadata(file: Path, node_type: str) -> tuple[dict | None, str]:
    """A ``zarr.json`` read within its bound: its content, or why it cannot be read."""
    try:
        text = read_bounded(file)
    except ValueError as error:
        return None, str(error)
    if text is None:
        return None, "it is missing"
    if not text.strip():
        return None, "it is empty"
    try:
        metadata = json.loads(text)
    except ValueError:
        return None, "it is cut short or is not JSON"
    if not isinstance(metadata, dict) or metadata.get("node_type") != node_type:
        return None, f"it describes no {node_type}"
    return metadata, ""


def metadata_problem(path, name: str) -> str:
    """Why the metadata of the array ``name`` of the store at ``path`` (``<name>/zarr.json``)
    cannot be read, in a few words; "" if it can."""
    return _metadata(Path(path, name, METADATA), "array")[1]


def identity(path) -> tuple[str | None, str]:
    """The grid's fingerprint the ``done`` array of the store at ``path`` keeps (its
    attribute ``grid``, beside the root's, so a store whose root is lost keeps its
    identity), or None and why it cannot be read."""
    metadata, why = _metadata(Path(path, "done", METADATA), "array")
    if metadata is None:
        return None, f"the metadata of done: {why}"
    fingerprint = (metadata.get("attributes") or {}).get("grid")
    if not isinstance(fingerprint, str):
        return None, "its done array was written before it kept the grid"
    return fingerprint, ""


def root_problem(path) -> str:
    """Why the root metadata of the store at ``path`` (its ``zarr.json``: the store's
    attributes, its grid among them) cannot be read, in a few words; "" if it can."""
    metadata, why = _metadata(Path(path, METADATA), "group")
    if metadata is not None and "grid" not in (metadata.get("attributes") or {}):
        return "it has lost the store's attributes"
    return why


def arrays(path) -> dict[str, str]:
    """Every array folder of the store at ``path`` -> why its metadata cannot be read ("":
    it can)."""
    folders = sorted(p.name for p in Path(path).iterdir() if p.is_dir())
    return {name: metadata_problem(path, name) for name in folders}
