"""Where ``python -m pipeline.analyze`` writes: an ``--out`` that cannot be written (a file, a
read-only folder, ``/proc``), the default folder beside a store on a read-only mount, and a
write that fails after the check each end in one line with exit status 2; reading a store on
a read-only mount (``--verify``, ``--out`` elsewhere) works.

Read-only folders are real read-only mounts (a tmpfs in a mount namespace of its own,
``sweeping.tmpfs``, which needs root or unprivileged user namespaces): root writes into a
folder whatever its mode.
"""

import shutil
from pathlib import Path

import numpy as np
import pytest

from pipeline.analyze import main
from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import SCHEMA
from pipeline.sweep.store import ResultStore

from sweeping import composed, tmpfs

WRITABLE = "allowed: a folder this user can write (made if missing)"
READ_ONLY = "refuses new files (Read-only file system)"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A finished store of 32 cells whose values reveal their cell."""
    path = tmp_path_factory.mktemp("output") / "s.zarr"
    grid = MethodsGrid.from_config(
        composed("grid.families=[bell]", "grid.methods={topp:[0.5,0.9]}")
    )
    results = ResultStore.open(path, SCHEMA, grid, {})
    for k, cell in enumerate(grid.cells()):
        results.record(cell, {"tv": np.full(grid.horizon + 1, float(k)), "gamma": k % 7})
    results.flush()
    return path


@pytest.fixture
def disk(tmp_path):
    """A writable tmpfs of 4 MiB (``sweeping.Tmpfs``: ``remount("ro")`` makes it read-only)."""
    with tmpfs(tmp_path / "disk") as mounted:
        yield mounted


# Each case: the --out, why it cannot be written, and the folder it would be made in.


def _a_file(tmp_path, request) -> tuple[Path, str, Path]:
    out = tmp_path / "notes.txt"
    out.write_text("mine")
    return out, "it is a file, not a folder", tmp_path


def _below_a_file(tmp_path, request) -> tuple[Path, str, Path]:
    (tmp_path / "notes.txt").write_text("mine")
    notes = tmp_path / "notes.txt"
    return notes / "report", f"{notes} is a file, not a folder", tmp_path


def _read_only_folder(tmp_path, request) -> tuple[Path, str, Path]:
    disk = request.getfixturevalue("disk")
    disk.remount("ro")
    return disk.path, f"{disk.path} {READ_ONLY}", disk.path


def _below_a_read_only_folder(tmp_path, request) -> tuple[Path, str, Path]:
    disk = request.getfixturevalue("disk")
    disk.remount("ro")
    return disk.path / "new" / "report", f"{disk.path} {READ_ONLY}", disk.path


def _proc(tmp_path, request) -> tuple[Path, str, Path]:
    return Path("/proc"), "/proc refuses new files (No such file or directory)", tmp_path


def _below_proc(tmp_path, request) -> tuple[Path, str, Path]:
    return Path("/proc/report"), "/proc refuses new files (No such file or directory)", tmp_path


@pytest.mark.parametrize(
    "unusable",
    [_a_file, _below_a_file, _read_only_folder, _below_a_read_only_folder, _proc, _below_proc],
    ids=lambda case: case.__name__.strip("_"),
)
def test_an_out_that_cannot_be_written_is_refused_in_one_line(
    unusable, store, tmp_path, request, capsys
):
    out, why, within = unusable(tmp_path, request)
    before = sorted(tmp_path.rglob("*")) + sorted(within.rglob("*"))
    assert main([str(store), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: --out: cannot write the report in {out}: {why}; {WRITABLE}\n"
    )
    assert sorted(tmp_path.rglob("*")) + sorted(within.rglob("*")) == before  # nothing made


def test_the_out_folder_is_checked_before_the_store_is_read(store, tmp_path, capsys):
    damaged = tmp_path / "damaged.zarr"
    shutil.copytree(store, damaged)
    for chunk in (damaged / "tv" / "c").rglob("*"):
        if chunk.is_file():
            chunk.write_bytes(b"not a chunk")
    assert main([str(damaged), "--out", "/proc"]) == 2
    assert capsys.readouterr().err.startswith("error: --out: cannot write the report in /proc:")
    assert main([str(damaged), "--out", str(tmp_path / "r")]) == 2
    assert "tv" in capsys.readouterr().err  # the damage, once the folder is fine


def test_a_write_that_fails_after_the_check_ends_in_one_line(store, disk, capsys):
    """The check passes (a full tmpfs still takes an empty file), the first figure does not
    fit: what a folder that changed since the check gives."""
    filler = disk.path / "filler"
    with filler.open("wb") as file, pytest.raises(OSError, match="No space left"):
        file.write(bytes(8 << 20))
    out = disk.path / "report"
    assert main([str(store), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: --out: cannot write the report in {out}: No space left on device; {WRITABLE}\n"
    )
    assert out.is_dir() and not (out / "report.md").exists()  # the check passed, a write failed


def test_a_store_on_a_read_only_mount_is_read_and_its_report_goes_elsewhere(
    store, disk, tmp_path, capsys
):
    folder = disk.path
    shutil.copytree(store, folder / "s.zarr")
    disk.remount("ro")
    on_disk = folder / "s.zarr"
    assert main([str(on_disk)]) == 2
    assert capsys.readouterr().err == (
        f"error: cannot write the report beside the store, in {folder / 's_report'}: {folder} "
        f"{READ_ONLY}; give --out <a writable folder>\n"
    )
    assert main(["--verify", str(on_disk)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{on_disk}: every chunk is sound"
    assert main([str(on_disk), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "report.md").is_file()
