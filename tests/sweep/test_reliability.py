"""The store under damage, interruption and a full disk: each probe of docs/stores.md.

Every kind of damage (a chunk deleted, copied to another position or cut short, an array's
metadata cut short, emptied or deleted, a manifest cut short) is named in one line by
``python -m pipeline.analyze --verify`` and by ``analyze``; the rerun recomputes exactly its
cells (none where only metadata or a manifest was hit) to a store equal to a clean run, and
``overwrite=true`` replaces the store; damage drawn at random (kind, array, chunk) is named
and repaired the same way. A store from before manifests is trusted and given them. Flushes
killed at random leave every chunk sound; a killed creation's folder is removed by the next
run; a full disk stops the store in one line, keeping what reached the disk.
"""

import logging
import multiprocessing
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import xarray as xr
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.analyze import main
from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import SCHEMA
from pipeline.results import Found, damage, found, manifest
from pipeline.sweep import run
from pipeline.sweep.config import ConfigError
from pipeline.sweep.store import ResultStore

from helpers import assert_same_values
from sweeping import TINY, composed, tmpfs

CAMPAIGN_SCALE = settings().max_examples
"""The loaded Hypothesis profile's examples (60 in 'ci', the default; 300 in 'dev'): the random
campaigns below scale with it (``HYPOTHESIS_PROFILE=dev`` runs them five times longer)."""

UNIFORM_20 = "tv/c/1/0/0/0/0/0/0"
BELL_20 = "tv/c/0/0/0/0/0/0/0"
DIRICHLET_40 = "tv/c/2/1/0/0/0/0/0"
BELL_40 = "tv/c/0/1/0/0/0/0/0"
UNIFORM_40 = "tv/c/1/1/0/0/0/0/0"
DIRICHLET_20 = "tv/c/2/0/0/0/0/0/0"
PAIR = 48
"""Cells of one (family, n_states) of the smoke grid: the cells of one chunk."""
RECOMPUTE = "run the same sweep command again to recompute its cells"
REBUILD = "run the same sweep command again to rebuild it from the grid, keeping every chunk that "


def _cut(file: Path) -> None:
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


def _replace(file: Path, by) -> None:
    """``file`` replaced by what ``by`` makes at its path (a link, a folder)."""
    file.unlink()
    by(file)


class Damage(NamedTuple):
    make: object
    """What is done to a copy of a sound store."""
    line: str
    """The one line ``--verify`` and ``analyze`` end with (``{s}``: the store)."""
    recomputed: int
    """Cells the rerun computes."""


DAMAGE = {
    "deleted chunk": Damage(
        lambda s: (s / UNIFORM_20).unlink(),
        "{s} is damaged: the tv chunk of family=uniform, n_states=20 ({s}/"
        f"{UNIFORM_20}) cannot be read: its file is missing; {RECOMPUTE}",
        PAIR,
    ),
    "chunk copied to another position": Damage(
        lambda s: shutil.copyfile(s / BELL_20, s / DIRICHLET_40),
        "{s} is damaged: the tv chunk of family=dirichlet, n_states=40 ({s}/"
        f"{DIRICHLET_40}) cannot be read: its bytes are those of the chunk of family=bell, "
        f"n_states=20 (copied or moved here); {RECOMPUTE}",
        PAIR,
    ),
    "truncated chunk": Damage(
        lambda s: _cut(s / BELL_40),
        "{s} is damaged: the tv chunk of family=bell, n_states=40 ({s}/"
        f"{BELL_40}) cannot be read: its checksum does not match its bytes; {RECOMPUTE}",
        PAIR,
    ),
    "chunk linked to a device": Damage(
        lambda s: _replace(s / UNIFORM_40, lambda f: f.symlink_to("/dev/zero")),
        "{s} is damaged: the tv chunk of family=uniform, n_states=40 ({s}/"
        f"{UNIFORM_40}) cannot be read: it is a symbolic link, not a file the sweep wrote; "
        f"{RECOMPUTE}",
        PAIR,
    ),
    "folder where a chunk belongs": Damage(
        lambda s: _replace(s / DIRICHLET_20, Path.mkdir),
        "{s} is damaged: the tv chunk of family=dirichlet, n_states=20 ({s}/"
        f"{DIRICHLET_20}) cannot be read: it is a directory, not a file the sweep wrote; "
        f"{RECOMPUTE}",
        PAIR,
    ),
    "deleted root zarr.json": Damage(
        lambda s: (s / "zarr.json").unlink(),
        "{s} is damaged: the root metadata ({s}/zarr.json) cannot be read: it is missing; "
        f"{REBUILD}verifies",
        0,
    ),
    "deleted array": Damage(
        lambda s: shutil.rmtree(s / "sparsity"),
        "{s} is damaged: the array sparsity ({s}/sparsity) is missing; run the same sweep "
        "command again to rebuild it and compute its cells again",
        288,
    ),
    "truncated zarr.json": Damage(
        lambda s: _cut(s / "tv" / "zarr.json"),
        "{s} is damaged: the metadata of tv ({s}/tv/zarr.json) cannot be read: it is cut "
        f"short or is not JSON; {REBUILD}verifies",
        0,
    ),
    "empty zarr.json": Damage(
        lambda s: (s / "gamma" / "zarr.json").write_bytes(b""),
        "{s} is damaged: the metadata of gamma ({s}/gamma/zarr.json) cannot be read: it is "
        f"empty; {REBUILD}verifies",
        0,
    ),
    "deleted zarr.json": Damage(
        lambda s: (s / "eps" / "zarr.json").unlink(),
        "{s} is damaged: the metadata of eps ({s}/eps/zarr.json) cannot be read: it is "
        f"missing; {REBUILD}verifies",
        0,
    ),
    "truncated manifest": Damage(
        lambda s: _cut(s / "bound" / "manifest.json"),
        "{s} is damaged: the manifest of bound ({s}/bound/manifest.json) cannot be "
        "read: it is cut short or is not JSON; run the same sweep command again to write it "
        "again from the chunks that read",
        0,
    ),
}
"""Each kind of damage, on its own array or chunk, so that they also combine."""
TOGETHER = {
    "chunks": [
        "deleted chunk",
        "chunk copied to another position",
        "truncated chunk",
        "chunk linked to a device",
        "folder where a chunk belongs",
    ],
    "metadata": [
        "deleted root zarr.json",
        "truncated zarr.json",
        "empty zarr.json",
        "deleted zarr.json",
        "truncated manifest",
    ],
    "all": list(DAMAGE),
}
"""Kinds of damage one store holds together."""


@pytest.fixture
def damaged(request, smoke, tmp_path) -> tuple[Path, list[Damage]]:
    """A copy of the session's smoke store with the damage named by the parameter (a kind,
    or a group of ``TOGETHER``)."""
    store = tmp_path / "r.zarr"
    shutil.copytree(smoke[0], store)
    cases = [DAMAGE[kind] for kind in TOGETHER.get(request.param, [request.param])]
    for case in cases:
        case.make(store)
    return store, cases


@pytest.mark.parametrize("damaged", DAMAGE, indirect=True)
def test_damage_is_named_in_one_line_by_verify_and_analyze(damaged, capsys):
    store, (case,) = damaged
    line = case.line.format(s=store)
    assert main(["--verify", str(store)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == line
    assert main([str(store)]) == 2
    assert capsys.readouterr().err == f"error: {line}\n"


@pytest.mark.parametrize("damaged", ["chunks", "metadata"], indirect=True)
def test_the_rerun_recomputes_exactly_the_damaged_cells(damaged, smoke, client, caplog):
    store, cases = damaged
    caplog.set_level(logging.INFO, logger="pipeline.sweep")
    repaired = run([*TINY, f"store={store}"], client=client).load()
    recomputed = sum(case.recomputed for case in cases)
    counts = re.search(r"(\d+) cells to compute, (\d+) already done", caplog.text).groups()
    assert tuple(map(int, counts)) == (recomputed, 288 - recomputed)
    assert not damage(store)
    assert_same_values(repaired, xr.open_zarr(smoke[0]).load())
    for name in ("tv", "gamma", "eps", "bound"):  # rebuilt as the sweep wrote them
        for file in ("zarr.json", "manifest.json"):
            assert (store / name / file).read_bytes() == (smoke[0] / name / file).read_bytes()


@pytest.mark.parametrize("damaged", ["all"], indirect=True)
def test_overwrite_never_discards_a_damaged_store_the_rerun_repairs(damaged):
    store, _ = damaged
    grid = MethodsGrid.from_config(composed())
    with pytest.raises(ConfigError, match=r"^overwrite: .* holds 288 finished cells that this"):
        ResultStore.check(store, SCHEMA, grid, overwrite=True)
    assert ResultStore.check(store, SCHEMA, grid)  # without overwrite: resumed and repaired
    resumed = ResultStore.open(store, SCHEMA, grid, {})
    assert resumed.n_done == 0  # an array was lost: every cell is computed again
    resumed.flush()  # what the first flush of the rerun writes: every chunk, not done
    assert found(store) is Found.RESULTS and not damage(store)


def test_a_store_from_before_manifests_is_trusted_and_gets_them(smoke, tmp_path, capsys):
    store = tmp_path / "r.zarr"
    shutil.copytree(smoke[0], store)
    for file in store.glob("*/manifest.json"):  # what the previous version wrote
        file.unlink()
    assert main(["--verify", str(store)]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        f"{store} has no manifests (written before them): each chunk is checked by its own "
        "checksum, not against its position; the next run of its sweep writes them",
        f"{store}: every chunk is sound",
    ]
    assert not damage(store)  # what analyze checks before it reads
    assert ResultStore.open(store, SCHEMA, MethodsGrid.from_config(composed()), {}).n_done == 288
    for file in smoke[0].glob("*/manifest.json"):  # the same as the sweep wrote
        assert (store / file.relative_to(smoke[0])).read_bytes() == file.read_bytes()


CAMPAIGN = (
    "delete",
    "copy",
    "truncate",
    "flip",
    "empty zarr.json",
    "cut zarr.json",
    "delete zarr.json",
    "cut manifest",
)
"""The damage the campaign draws, to a chunk file or to an array's files."""


def _small_grid():
    return MethodsGrid.from_config(
        composed("grid.families=[bell]", "grid.methods={topp:[0.5,0.9]}")
    )


def _fill(store: ResultStore, cells) -> None:
    """Values that reveal their cell."""
    for cell in cells:
        k = float(store.grid.cells().index(cell))
        store.record(cell, {"tv": np.full(store.grid.horizon + 1, k), "gamma": k % 7})


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> tuple[Path, MethodsGrid]:
    """A finished store of 16 cells in two chunks per array, built once for the campaign,
    and its grid."""
    path = tmp_path_factory.mktemp("campaign") / "clean.zarr"
    grid = _small_grid()
    store = ResultStore.open(path, SCHEMA, grid, {})
    _fill(store, grid.cells())
    store.flush()
    return path, grid


@settings(max_examples=CAMPAIGN_SCALE // 20)  # 3 in 'ci': each damages and repairs a store
@given(data=st.data())
def test_any_damage_drawn_is_named_and_repaired_to_the_clean_store(small_store, data):
    small_store, grid = small_store
    kind = data.draw(st.sampled_from(CAMPAIGN), "kind")
    files = sorted(manifest.chunk_files(small_store))
    key = data.draw(st.sampled_from(files), "chunk")
    name = key.split("/")[0]
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "r.zarr"
        shutil.copytree(small_store, store)
        target, named = store / key, key
        if kind == "delete":
            target.unlink()
        elif kind == "copy":
            others = [f for f in files if f.startswith(f"{name}/c/") and f != key]
            source = store / data.draw(st.sampled_from(others or [key]), "source")
            assume(source.read_bytes() != target.read_bytes())
            shutil.copyfile(source, target)
        elif kind in ("truncate", "flip"):
            content = bytearray(target.read_bytes())
            if kind == "flip":
                content[data.draw(st.integers(0, len(content) - 1), "byte")] ^= 0x01
            target.write_bytes(bytes(content if kind == "flip" else content[:-3]))
        else:
            named = f"{name}/{'manifest.json' if 'manifest' in kind else 'zarr.json'}"
            file = store / named
            {"empty": lambda: file.write_bytes(b""), "delete": file.unlink}.get(
                kind.split()[0], lambda: _cut(file)
            )()
        assert [c.file for c in damage(store)] == [named]
        resumed = ResultStore.open(store, SCHEMA, grid, {})
        pair = tuple(int(k) for k in key.split("/")[2:4])
        hit = named == key and name in SCHEMA.variables
        assert resumed.todo() == [c for c in grid.cells() if hit and grid.index(c)[:2] == pair]
        _fill(resumed, resumed.todo())
        resumed.flush()
        assert not damage(store)
        clean, repaired = xr.open_zarr(small_store).load(), xr.open_zarr(store).load()
        xr.testing.assert_identical(repaired.drop_attrs(), clean.drop_attrs())
        assert (store / name / "zarr.json").read_bytes() == (
            small_store / name / "zarr.json"
        ).read_bytes()


READ_LIMIT = 1_500_000_000
"""The address space ``--verify`` is given (``ulimit -v``): twice what it takes on a sound
store, far less than a link to ``/dev/zero`` or a 20 GB sparse file would make it read."""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (READ_LIMIT, READ_LIMIT))


def test_a_chunk_linked_to_a_device_is_named_within_a_memory_bound(small_store, tmp_path):
    source, _ = small_store
    store = tmp_path / "r.zarr"
    shutil.copytree(source, store)
    device, sparse = store / "tv/c/0/0/0/0/0/0/0", store / "tv/c/0/1/0/0/0/0/0"
    _replace(device, lambda f: f.symlink_to("/dev/zero"))
    os.truncate(sparse, 20 * 10**9)  # a sparse file of 20 GB
    verified = subprocess.run(
        [sys.executable, "-m", "pipeline.analyze", "--verify", str(store)],
        preexec_fn=_limited,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 1 and not verified.stderr, verified.stderr
    assert verified.stdout.splitlines()[-1] == (
        f"{store} is damaged: the tv chunk of family=bell, n_states=20, method=topp ({device}) "
        "cannot be read: it is a symbolic link, not a file the sweep wrote (and 1 more chunk); "
        "run the same sweep command again to recompute its cells"
    )
    assert [c.error for c in damage(store)] == [
        "it is a symbolic link, not a file the sweep wrote",
        "it holds 20,000,000,000 bytes, more than it can (5,515)",
    ]


def _flush_forever(path: Path, flushing) -> None:
    """Resume the store at ``path`` and flush every cell again and again, with new values;
    set ``flushing`` after the first flush."""
    grid = MethodsGrid.from_config(composed("grid.families=[bell]"))
    store = ResultStore.open(path, SCHEMA, grid, {})
    for k in range(1, 10**6):
        for cell in grid.cells():
            store.record(cell, {"tv": np.full(grid.horizon + 1, float(k)), "gamma": float(k)})
        store.flush()
        flushing.set()


def test_flushes_killed_at_random_leave_every_chunk_sound(tmp_path):
    path = tmp_path / "r.zarr"
    grid = MethodsGrid.from_config(composed("grid.families=[bell]"))
    ResultStore.open(path, SCHEMA, grid, {})
    rng = random.Random(35)
    fork = multiprocessing.get_context("fork")  # this process's imports, no start-up
    inside = 0  # kills that left a flush half done: its temporary files
    for _ in range(CAMPAIGN_SCALE // 15):  # 4 in 'ci'
        flushing = fork.Event()
        writer = fork.Process(target=_flush_forever, args=(path, flushing))
        writer.start()
        assert flushing.wait(60)
        time.sleep(rng.uniform(0, 0.3))  # somewhere in a later flush
        os.kill(writer.pid, signal.SIGKILL)
        writer.join()
        inside += any(path.rglob("*.partial"))
        assert not damage(path)
        ds = xr.open_zarr(path).load()
        assert np.isfinite(ds.tv.values[ds.done.values]).all()  # a done cell has its values
    assert inside  # the kills did land inside flushes
    assert ResultStore.open(path, SCHEMA, grid, {}).n_done == len(grid.cells())


def _ended_pid() -> int:
    """The PID of a process that has ended."""
    with subprocess.Popen(["true"]) as ended:
        ended.wait()
    return ended.pid


def test_what_killed_creators_left_is_removed_only_when_it_holds_no_finished_cell(
    small_store, tmp_path
):
    source, grid = small_store
    path = tmp_path / "r.zarr"
    dead = [_ended_pid(), _ended_pid()]  # PIDs no process has now
    empty = tmp_path / f".r.zarr.{dead[0]}.creating"  # a new store's: nothing finished
    ResultStore.open(empty, SCHEMA, grid, {})
    with subprocess.Popen(["sleep", "60"]) as alive:
        running = tmp_path / f".r.zarr.{alive.pid}.creating"  # a creator still at work
        running.mkdir()
        try:
            ResultStore.open(path, SCHEMA, grid, {})
            assert sorted(p.name for p in tmp_path.iterdir()) == [running.name, "r.zarr"]
            finished = tmp_path / f".r.zarr.{dead[-1]}.creating"  # a grown store's cells
            shutil.copytree(source, finished)
            with pytest.raises(
                ConfigError, match=rf"^store: {finished} holds 32 finished cells, not proved"
            ):
                ResultStore.open(path, SCHEMA, grid, {})
            assert found(finished) is Found.RESULTS and not damage(finished)  # kept, whole
        finally:
            alive.kill()


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 4 MiB (``sweeping.Tmpfs``), unmounted after."""
    with tmpfs(tmp_path / "disk") as disk:
        yield disk


def _used_kib(disk: Path) -> int:
    stat = os.statvfs(disk)
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize // 1024


def test_a_full_disk_stops_a_flush_in_one_line_and_keeps_what_reached_it(small_disk):
    path = small_disk.path / "r.zarr"
    grid = MethodsGrid.from_config(composed("grid.families=[bell]"))
    cells = grid.cells()
    first = [cell for cell in cells if grid.index(cell)[:2] == (0, 0)]
    store = ResultStore.open(path, SCHEMA, grid, {})
    for cell in first:
        store.record(cell, {"gamma": 0.5})
    store.flush()
    small_disk.remount(f"size={_used_kib(small_disk.path) + 48}k")  # less than the next chunks need
    for cell in cells[len(first) :]:
        store.record(cell, {"gamma": 0.25})
    with pytest.raises(ConfigError) as full:
        store.flush()
    assert str(full.value) == (
        f"store: {path}: the disk is full (No space left on device); the finished cells that "
        "reached the disk are kept: free some space, then run the same command again"
    )
    assert not damage(path) and not list(path.rglob("*.partial"))
    kept = xr.open_zarr(path).load()
    assert int(kept.done.sum()) == len(first)
    assert float(kept.gamma.sel(family="bell", n_states=20).max()) == 0.5
    small_disk.remount("size=4096k")
    store.flush()  # space again: what did not fit is written
    assert int(xr.open_zarr(path).done.sum()) == len(cells) and not damage(path)


def test_a_sweep_on_a_full_disk_ends_in_one_line(small_disk, client):
    store = small_disk.path / "r.zarr"
    grid = MethodsGrid.from_config(composed("grid.families=[bell]"))
    ResultStore.open(store, SCHEMA, grid, {})  # how much a new store takes
    small_disk.remount(f"size={_used_kib(small_disk.path) + 100}k")  # less than a flush needs
    shutil.rmtree(store)
    with pytest.raises(ConfigError, match=r"^store: .*: the disk is full \(No space left"):
        run([*TINY, "grid.families=[bell]", f"store={store}"], client=client)
    assert found(store) is Found.RESULTS and not damage(store)
