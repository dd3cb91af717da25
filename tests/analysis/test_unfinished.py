"""``analyze`` on stores that are not finished, or not timed: it reports what is finished."""

import numpy as np
import xarray as xr
from matplotlib.image import imread

from pipeline.analysis import analyze
from pipeline.analyze import main
from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import SCHEMA
from pipeline.results import damage
from pipeline.sweep import run
from pipeline.sweep.store import ResultStore

from sweeping import TINY, composed

STATUS = ("done", "failed", "error")


def interrupted(source, path, fraction: float, *overrides: str):
    """The store a sweep of the smoke grid (with ``overrides``) leaves when it stops after
    ``fraction`` of its cells (in the order it computes them): those cells of the smoke
    store ``source``, recorded and flushed through the store layer."""
    full = xr.open_zarr(source).load()
    grid = MethodsGrid.from_config(composed(*overrides))
    store = ResultStore.open(path, SCHEMA, grid, dict(full.attrs))
    cells = grid.cells()
    for cell in cells[: round(len(cells) * fraction)]:
        at = cell._asdict()
        store.record(
            cell,
            {
                name: full[name].sel({d: at[d] for d in full[name].dims if d in at}).values
                for name in SCHEMA.variables
                if name not in STATUS
            },
        )
    store.flush()
    return path


def test_a_store_interrupted_at_a_third_is_reported_as_far_as_it_is_finished(
    smoke, tmp_path, capsys
):
    store = interrupted(smoke[0], tmp_path / "r.zarr", 1 / 3, "methods.grid.families=[bell]")
    assert int(xr.open_zarr(store).done.sum()) == 32 and not damage(store)
    assert main([str(store)]) == 0
    assert capsys.readouterr().err == ""
    out = tmp_path / "r_report"
    text = (out / "report.md").read_text()
    assert "- cells done: 32 of 96" in text
    assert "This store is not finished (32 of 96 cells done" in text
    rows = text.split("## Every model, method and setting")[1].splitlines()
    done = {}  # (family, n_states) -> each variant's done cells, from the summary's rows
    for row in rows:
        if row.strip().startswith("bell"):
            family, n_states, *_, count = row.split()
            done.setdefault((family, n_states), []).append(int(count.split("/")[0]))
    assert sum(done[("bell", "20")]) == 32 and min(done[("bell", "20")]) < 8
    assert done[("bell", "40")] == [0] * 6
    for name in ("runtime.png", "tv.png", "pareto.png", "payoff.png"):
        assert np.ptp(imread(out / name)[..., :3]) > 0.5  # something is drawn


def test_a_sweep_without_timings_is_reported(client, tmp_path):
    untimed = [*TINY, "methods.grid.families=[bell]", "grid.n_states=[20]", "timing.enabled=false"]
    ds = run([*untimed, f"store={tmp_path / 'r.zarr'}"], client=client)
    assert int(ds.done.sum()) == 48 and bool(ds.runtime_approx.isnull().all())
    written = analyze(ds)
    text = written.report.read_text()
    assert "- cells done: 48 of 48" in text and "This store is not finished" not in text
    assert "No done cell was timed (a sweep with methods.timing.enabled=false)" in text
    assert all(figure.is_file() for figure in written.figures)
