"""``python -m pipeline.analyze`` in its own words: its help lists its own options, not the
sweep's keys, and a path that is no store is refused in one line that speaks of reading
(naming the stores a folder holds), with exit status 2."""

import pytest

from pipeline.analyze import main
from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import SCHEMA
from pipeline.sweep.store import ResultStore

from sweeping import composed


def test_help_lists_the_commands_own_options(capsys):
    with pytest.raises(SystemExit) as ended:
        main(["--help"])
    assert ended.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith("usage: python -m pipeline.analyze")
    for option in ("store", "--out OUT", "--verify"):
        assert option in shown
    assert "grid." not in shown and "store=" not in shown  # none of the sweep's keys


@pytest.fixture(scope="module")
def grid():
    return MethodsGrid.from_config(composed("grid.families=[bell]", "grid.seeds=[0]"))


def test_a_folder_of_stores_is_refused_naming_them(tmp_path, grid, capsys):
    outputs = tmp_path / "outputs"
    ResultStore.open(outputs / "smoke" / "results.zarr", SCHEMA, grid, {})
    (outputs / "smoke" / "hydra").mkdir()
    assert main([str(outputs)]) == 2
    assert capsys.readouterr().err == (
        f"error: {outputs} is a directory but no zarr store; it holds the results stores "
        f"{outputs / 'smoke' / 'results.zarr'}: give one of them\n"
    )


@pytest.mark.parametrize(
    ("make", "line"),
    [
        (lambda path: path.mkdir(), "is an empty directory; run its sweep first"),
        (lambda path: path.write_text("x"), "is a file; give the path of a sweep's results"),
        (lambda path: (path / "notes").mkdir(parents=True), "is a directory but no zarr store"),
    ],
    ids=["empty", "file", "folder"],
)
def test_a_path_that_is_no_store_is_refused_in_a_readers_words(tmp_path, capsys, make, line):
    path = tmp_path / "given"
    make(path)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path} {line}") and err.count("\n") == 1
    assert "store=" not in err  # the sweep's key: nothing a reader of a store can give
