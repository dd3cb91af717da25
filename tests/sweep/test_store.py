import multiprocessing
import os
import shutil
import signal

import numpy as np
import pytest
import xarray as xr
import zarr

from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import DIMS, SCHEMA, VARIABLES
from pipeline.results import Found, StoreError, damage, damage_line, found, open_results
from pipeline.sweep.config import ConfigError
from pipeline.sweep.store import ResultStore

from sweeping import composed


@pytest.fixture(scope="module")
def grid():
    """Not a product: methods with different settings, families with different sizes."""
    return MethodsGrid.from_config(
        composed(
            "grid.n_states={bell:[20,40],uniform:[20],dirichlet:[40]}",
            "grid.methods={topp:[0.5,0.9],topk:[3]}",
        )
    )


def fake_values(cell, grid):
    """Values that reveal their cell, so a mislabelled write is caught.

    A variable without some of the cell's dims gets the same value from every
    cell that shares the dims it has.
    """
    code = dict(zip(DIMS, grid.index(cell), strict=True))
    values = {}
    for name, variable in VARIABLES.items():
        if variable.dtype != "float64":
            continue
        kept = [code[d] for d in DIMS if d in variable.dims]
        value = float(sum(i * 10**k for k, i in enumerate(kept)))
        values[name] = np.full(grid.horizon + 1, value) if "t" in variable.dims else value
    return values


def test_round_trip_with_plain_xarray(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, SCHEMA, grid, {"note": "test"})
    cells = grid.cells()
    for cell in cells[:-1]:
        store.record(cell, fake_values(cell, grid))
    store.record_failure(cells[-1], "ValueError: boom")
    store.flush()
    ds = xr.open_zarr(path)
    assert dict(ds.sizes) == {
        "family": 3,
        "n_states": 2,
        "method": 2,
        "setting": 3,
        "seed": 2,
        "mode": 4,
        "t": 11,
    }
    for name in [*VARIABLES, "in_grid"]:
        assert ds[name].attrs["units"] and ds[name].attrs["long_name"], name
    assert "NaN in filter, smooth" in ds["certificate"].attrs["missing"]
    assert int(ds.done.sum()) == len(cells) - 1 and int(ds.failed.sum()) == 1
    assert int(ds.in_grid.sum()) * 2 * 4 == len(cells)
    assert ds.attrs["note"] == "test" and "grid" in ds.attrs and ds.attrs["format"] == 2
    read = ds[["tv", "gamma", "sparsity", "bound"]].load()
    for cell in cells[:-1]:
        selected = read.sel(cell._asdict())
        expected = fake_values(cell, grid)
        assert float(selected.tv.isel(t=3)) == expected["tv"][3]
        assert float(selected.gamma) == expected["gamma"]
        assert float(selected.sparsity) == expected["sparsity"]
        assert float(selected.bound.isel(t=0)) == expected["bound"][0]
    failed = ds.sel(cells[-1]._asdict())
    assert str(failed.error.values) == "ValueError: boom" and not bool(failed.done)
    one = ds.tv.where(ds.in_grid).sel({"method": "topk", "setting": 3.0})
    assert bool(one.sel(family="bell", n_states=40).notnull().all())
    assert bool(one.sel(family="uniform", n_states=40).isnull().all())


def test_resume_reads_back_and_skips_done_cells(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, SCHEMA, grid, {})
    first = grid.cells()[:7]
    for cell in first:
        store.record(cell, fake_values(cell, grid))
    store.flush()
    resumed = ResultStore.open(path, SCHEMA, grid, {})
    assert resumed.n_done == 7
    todo = resumed.todo()
    assert len(todo) == len(grid.cells()) - 7 and not set(todo) & set(first)


def test_unflushed_records_are_not_in_the_store(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, SCHEMA, grid, {})
    store.record(grid.cells()[0], fake_values(grid.cells()[0], grid))
    assert int(xr.open_zarr(path).done.sum()) == 0
    assert ResultStore.open(path, SCHEMA, grid, {}).n_done == 0


def test_a_different_grid_is_refused_or_replaced(tmp_path, grid):
    path = tmp_path / "r.zarr"
    ResultStore.open(path, SCHEMA, grid, {})
    other = MethodsGrid.from_config(composed("grid.methods={topp:[0.5,0.7]}"))
    with pytest.raises(ConfigError, match=r"store: .* holds a different sweep: methods is "):
        ResultStore.check(path, SCHEMA, other)
    assert not ResultStore.check(path, SCHEMA, other, overwrite=True)
    replaced = ResultStore.open(path, SCHEMA, other, {}, overwrite=True)
    assert replaced.n_done == 0
    assert xr.open_zarr(path).setting.values.tolist() == [0.5, 0.7]


def _foreign(path):
    zarr.open_group(path, mode="w").create_array("x", shape=(2,), dtype="f8")


def _old(path, grid):
    ResultStore.open(path, SCHEMA, grid, {})
    group = zarr.open_group(path, mode="r+", use_consolidated=False)
    del group.attrs["format"]  # what every store written before the methods layer lacks


CASES = {
    "file": (
        lambda p, g: p.write_text("x"),
        "is a file; a store is a directory: give another path (store=)",
        "is a file; give the path of a sweep's results store (a folder)",
    ),
    "folder": (
        lambda p, g: (p.mkdir(), (p / "notes.txt").write_text("x")),
        "is a directory but no zarr store; give another path (store=): a sweep never "
        "writes into a folder that holds something else",
        "is a directory but no zarr store; give the path of a sweep's results store",
    ),
    "foreign": (
        lambda p, g: _foreign(p),
        "is a zarr store of another program; give another "
        "path (store=): overwrite=true never replaces another program's data",
        "is a zarr store of another program; it was not written by a sweep of this pipeline: "
        "give the path of one",
    ),
    "old": (
        _old,
        "is a results store of an older layout (layout 1; this pipeline reads layout "
        "2, with the method and setting dims: see the README's release notes); this pipeline "
        "cannot keep its cells: run its sweep again with overwrite=true to replace it",
        "is a results store of an older layout (layout 1; this pipeline reads layout "
        "2, with the method and setting dims: see the README's release notes); this pipeline "
        "reads no other layout: run its sweep again with overwrite=true to replace it",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_what_a_store_path_holds_is_said_in_one_line_to_the_sweep_and_to_analyze(
    tmp_path, grid, case
):
    make, line, read = CASES[case]
    path = tmp_path / "r.zarr"
    make(path, grid)
    with pytest.raises(ConfigError) as refused:
        ResultStore.check(path, SCHEMA, grid)
    assert str(refused.value) == f"store: {path} {line}"
    with pytest.raises(StoreError) as unread:
        open_results(path)
    assert str(unread.value) == f"{path} {read}"
    if case != "old":  # the only one whose cells overwrite=true may discard
        with pytest.raises(ConfigError):
            ResultStore.check(path, SCHEMA, grid, overwrite=True)
        return
    assert not ResultStore.check(path, SCHEMA, grid, overwrite=True)
    ResultStore.open(path, SCHEMA, grid, {}, overwrite=True)
    assert found(path) is Found.RESULTS and not damage(path)


def test_analyze_names_the_stores_a_folder_holds(tmp_path, grid):
    ResultStore.open(tmp_path / "a" / "results.zarr", SCHEMA, grid, {})
    ResultStore.open(tmp_path / "b.zarr", SCHEMA, grid, {})
    with pytest.raises(StoreError) as unread:
        open_results(tmp_path)
    assert str(unread.value) == (
        f"{tmp_path} is a directory but no zarr store; it holds the results stores "
        f"{tmp_path / 'b.zarr'}, {tmp_path / 'a' / 'results.zarr'}: give one of them"
    )


@pytest.fixture(scope="module")
def small():
    """Two chunks per array: 16 cells of one family at two sizes."""
    return MethodsGrid.from_config(
        composed("grid.families=[bell]", "grid.methods={topp:[0.5,0.9]}", "grid.seeds=[0]")
    )


@pytest.fixture(scope="module")
def finished(small, tmp_path_factory):
    """A finished store of ``small``, made once: its path and what it holds."""
    path = tmp_path_factory.mktemp("finished") / "clean.zarr"
    return path, _filled(path, small)


def _computed_again(resumed: ResultStore, clean: xr.Dataset) -> None:
    """The cells a resumed store lacks computed again: it ends sound and equal to ``clean``."""
    for cell in resumed.todo():
        resumed.record(cell, fake_values(cell, resumed.grid))
    resumed.flush()
    assert not damage(resumed.path)
    repaired = xr.open_zarr(resumed.path).load()
    xr.testing.assert_identical(repaired.drop_attrs(), clean.drop_attrs())


def _filled(path, grid, cells=None) -> xr.Dataset:
    store = ResultStore.open(path, SCHEMA, grid, {})
    for cell in grid.cells() if cells is None else cells:
        store.record(cell, fake_values(cell, grid))
    store.flush()
    return xr.open_zarr(path).load()


LOST_ROOTS = {
    "deleted": lambda path: (path / "zarr.json").unlink(),
    "cut short": lambda path: (path / "zarr.json").write_text("{"),
    "attributes cleared": lambda path: zarr.open_group(
        path, mode="r+", use_consolidated=False
    ).attrs.clear(),
}


@pytest.mark.parametrize("lose", LOST_ROOTS)
def test_a_lost_root_is_named_and_rebuilt_from_the_grid_keeping_every_cell(
    tmp_path, small, finished, lose
):
    grid, path, (source, clean) = small, tmp_path / "r.zarr", finished
    shutil.copytree(source, path)
    LOST_ROOTS[lose](path)
    assert found(path) in (Found.ROOTLESS, Found.UNREADABLE)
    (first, *_) = damage(path)
    assert (first.array, first.file) == ("", "zarr.json")
    assert damage_line(path, damage(path)).endswith(
        "; run the same sweep command again to rebuild it from the grid, keeping every chunk "
        "that verifies"
    )
    assert ResultStore.check(path, SCHEMA, grid)  # resumed, not replaced
    assert ResultStore.open(path, SCHEMA, grid, {"note": "rebuilt"}).todo() == []
    assert found(path) is Found.RESULTS and not damage(path)
    repaired = xr.open_zarr(path).load()
    xr.testing.assert_identical(repaired.drop_attrs(), clean.drop_attrs())
    assert repaired.attrs["note"] == "rebuilt" and repaired.attrs["grid"] == grid.fingerprint()


ROOTLESS = "is a results store that has lost its root metadata (zarr.json)"


def test_a_lost_root_is_rebuilt_only_for_the_sweep_its_done_array_names(tmp_path, small, finished):
    """The coordinates alone do not prove a store is this sweep's: ``observe_every`` changes
    every filtering cell and no coordinate. A store from before ``done`` kept the grid
    cannot be proved anyone's."""
    path = tmp_path / "r.zarr"
    shutil.copytree(finished[0], path)
    (path / "zarr.json").unlink()
    other = MethodsGrid.from_config(
        composed(
            "grid.families=[bell]",
            "grid.methods={topp:[0.5,0.9]}",
            "grid.seeds=[0]",
            "grid.observe_every=3",
        )
    )
    assert other.coords().keys() == small.coords().keys()
    for overwrite in (False, True):
        with pytest.raises(ConfigError) as refused:
            ResultStore.check(path, SCHEMA, other, overwrite=overwrite)
        assert str(refused.value) == (
            f"store: {path} {ROOTLESS}, and it is another sweep's (observe_every is 2 in the "
            "store but 3 in this run); it holds 16 finished cells: run the command that made "
            "it to repair it"
        )
    metadata = path / "done" / "zarr.json"
    metadata.write_text(metadata.read_text().replace('"grid"', '"no_grid"'))
    with pytest.raises(ConfigError) as refused:
        ResultStore.check(path, SCHEMA, small)
    assert str(refused.value) == (
        f"store: {path} {ROOTLESS}, its identity cannot be read either (its done array was "
        "written before it kept the grid); it holds 16 finished cells: give another store="
    )


def test_overwrite_refuses_flags_it_cannot_read(tmp_path, small, finished):
    """A store whose ``done`` metadata is damaged may hold finished cells: the rerun would
    rebuild it and keep them, so ``overwrite=true`` does not discard them."""
    path = tmp_path / "r.zarr"
    shutil.copytree(finished[0], path)
    (path / "done" / "zarr.json").write_text("{")
    with pytest.raises(ConfigError, match=r"holds finished cells \(its done flags cannot all"):
        ResultStore.check(path, SCHEMA, small, overwrite=True)
    assert ResultStore.open(path, SCHEMA, small, {}).n_done == 16


def _resume_killed_at_its_flush(path, grid) -> None:
    """``ResultStore.open`` of ``path`` in a forked process that SIGKILLs itself where the
    resume's repairs are written (its flush)."""

    def resume() -> None:
        ResultStore.flush = lambda self: os.kill(os.getpid(), signal.SIGKILL)
        ResultStore.open(path, SCHEMA, grid, {})

    child = multiprocessing.get_context("fork").Process(target=resume)
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL


@pytest.mark.parametrize("array", ["tv", "done", "family"])
def test_a_missing_array_is_named_rebuilt_and_its_cells_computed_again(
    tmp_path, small, finished, array
):
    grid, path, (source, clean) = small, tmp_path / "r.zarr", finished
    shutil.copytree(source, path)
    shutil.rmtree(path / array)
    (missing,) = damage(path)
    assert missing.array == array and missing.error == "it is missing"
    variable = array in SCHEMA.variables
    assert damage_line(path, [missing]) == (
        f"{path} is damaged: the array {array} ({path}/{array}) is missing; run the same sweep "
        "command again to rebuild it and compute its cells again"
        if variable
        else f"{path} is damaged: the metadata of {array} ({path}/{array}/zarr.json) cannot be "
        "read: it is missing; run the same sweep command again to rebuild it from the grid, "
        "keeping every chunk that verifies"
    )
    _resume_killed_at_its_flush(path, grid)  # rebuilt, not yet flushed: never done with NaN
    resumed = ResultStore.open(path, SCHEMA, grid, {})
    assert len(resumed.todo()) == (len(grid.cells()) if variable else 0)
    _computed_again(resumed, clean)


def test_overwrite_never_deletes_the_finished_cells_of_the_same_sweep(tmp_path, grid):
    path = tmp_path / "r.zarr"
    clean = _filled(path, grid, grid.cells()[:3])
    larger = MethodsGrid.from_config(
        composed(
            "grid.n_states={bell:[20,40],uniform:[20],dirichlet:[40]}",
            "grid.methods={topp:[0.5,0.9],topk:[3]}",
            "grid.seeds=[0,1,2]",
        )
    )
    for same in (grid, larger):  # resumed, or grown: either keeps the cells
        with pytest.raises(ConfigError) as refused:
            ResultStore.check(path, SCHEMA, same, overwrite=True)
        assert str(refused.value) == (
            f"overwrite: {path} holds 3 finished cells that this run keeps; overwrite=true "
            "never deletes them: run without it to resume (damaged cells are computed again), "
            "or remove the store yourself to compute every cell again"
        )
    kept = xr.open_zarr(path).load()
    xr.testing.assert_identical(kept, clean)
    empty = tmp_path / "e.zarr"
    ResultStore.open(empty, SCHEMA, grid, {})
    assert not ResultStore.check(empty, SCHEMA, grid, overwrite=True)  # nothing to lose


def test_a_new_store_is_written_aside_and_renamed_into_place(tmp_path, grid):
    path = tmp_path / "r.zarr"
    assert not ResultStore.check(path, SCHEMA, grid)
    (tmp_path).joinpath("r.zarr").mkdir()  # an empty directory is a new store's place
    ResultStore.open(path, SCHEMA, grid, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.zarr"]
    for name in xr.open_zarr(path).variables:  # every array carries its checksum
        codecs = zarr.open_array(path / name, mode="r").metadata.codecs
        assert [type(c).__name__ for c in codecs][-1] == "Crc32cCodec", name


def _flip(file):
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x10
    file.write_bytes(bytes(data))


def test_damaged_chunks_are_named_and_only_their_cells_computed_again(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, SCHEMA, grid, {})
    for cell in grid.cells():
        store.record(cell, fake_values(cell, grid))
    store.flush()
    clean = xr.open_zarr(path).load()
    (path / "tv" / "c" / "0" / "1" / "0" / "0" / "0" / "0" / "0").write_bytes(b"")  # truncated
    _flip(path / "done" / "c" / "2" / "1" / "0" / "0" / "0" / "0")  # dirichlet, 40
    _flip(path / "t" / "c" / "0")  # a coordinate
    damaged = damage(path)
    assert [(c.array, c.where) for c in damaged] == [
        ("done", "family=dirichlet, n_states=40"),
        ("t", ""),
        ("tv", "family=bell, n_states=40"),
    ]
    assert {c.error for c in damaged} == {"its checksum does not match its bytes"}
    assert damage_line(path, damaged) == (
        f"{path} is damaged: the done chunk of family=dirichlet, n_states=40 "
        f"({path}/done/c/2/1/0/0/0/0) cannot be read: its checksum does not match its bytes "
        "(and 2 more chunks); run the same sweep command again to recompute its cells"
    )
    resumed = ResultStore.open(path, SCHEMA, grid, {})
    todo = resumed.todo()
    assert todo == [
        c for c in grid.cells() if (c.family, c.n_states) in {("bell", 40), ("dirichlet", 40)}
    ]
    _computed_again(resumed, clean)


def test_overwrite_replaces_a_damaged_store(tmp_path, grid):
    path = tmp_path / "r.zarr"
    store = ResultStore.open(path, SCHEMA, grid, {})
    store.record(grid.cells()[0], fake_values(grid.cells()[0], grid))
    store.flush()
    _flip(path / "tv" / "c" / "0" / "0" / "0" / "0" / "0" / "0" / "0")
    other = MethodsGrid.from_config(composed("grid.methods={topp:[0.5,0.7]}"))
    ResultStore.open(path, SCHEMA, other, {}, overwrite=True)
    assert not damage(path) and xr.open_zarr(path).setting.values.tolist() == [0.5, 0.7]
