"""The learning sweep (issue 42): config errors, a cell against its reference, one real run
that resumes and grows, and its report."""

import logging

import numpy as np
import pytest
import xarray as xr
from matplotlib.image import imread

from pipeline.analysis import analyze
from pipeline.kinds.learning import sweep as learning
from pipeline.kinds.learning.grid import LearningCell
from pipeline.kinds.learning.report import problems
from pipeline.kinds.learning.results import references
from pipeline.kinds.learning.tasks import learning_cell, reference_task
from pipeline.learning.summary import fastest_within
from pipeline.sweep import run
from pipeline.sweep.config import ConfigError, validate

from sweeping import assert_warmup_attributes, composed

SMOKE = ["experiment=learning_smoke"]


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "+learning.methods.topp=[0.9]",
            "learning.methods: 'topp' is not allowed; allowed: topp_transitions, topk_transitions,",
        ),
        (
            "learning.methods.topk_transitions=[1.5]",
            "learning.methods.topk_transitions: 1.5 is not allowed;",
        ),
        ("+learning.families.bel=[8]", "learning.families: 'bel' is not allowed; allowed:"),
        ("learning.families.bell=[1]", "learning.families.bell: n_states must be an integer"),
        ("learning.length=[1]", "learning.length: 1 is not allowed"),
        ("learning.noise=0", "learning.noise: 0.0 is not allowed"),
        ("learning.iterations=0", "learning.iterations: 0 is not allowed; allowed: integers >= 1"),
    ],
)
def test_bad_settings_are_one_line_errors(override, expected):
    with pytest.raises(ConfigError) as error:
        validate(composed(*SMOKE, override))
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_a_cell_that_keeps_every_entry_is_its_reference():
    grid = learning.grid(composed(*SMOKE))
    cell = LearningCell("bell", 8, 0, 4, 10, "topk_transitions", 8.0)
    exact = reference_task(cell.problem, grid.settings)
    record = learning_cell(cell, exact, grid.settings)
    np.testing.assert_allclose(record.held_out, record.held_out_exact, rtol=0, atol=1e-12)
    assert abs(record.held_out_gap) < 1e-12 and record.to_reference_transition_max < 1e-12
    assert record.held_out.shape == (4,) and record.iterations == 4
    kept = learning_cell(cell._replace(setting=2.0), exact, grid.settings)
    assert kept.to_reference_transition_mean > 1e-6  # k = 2 of 8 learns another model
    np.testing.assert_array_equal(kept.held_out_exact, record.held_out_exact)


def test_the_sweep_runs_resumes_grows_and_reports(client, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pipeline.sweep")
    path = tmp_path / "results.zarr"
    run([*SMOKE, f"store={path}"], client=client)
    assert "6 cells to compute, 0 already done" in caplog.text
    ds = xr.open_zarr(path).load()
    assert ds.attrs["kind"] == "learning" and int(ds["done"].sum()) == 6
    assert dict(ds.sizes) == {
        "family": 2,
        "n_states": 2,
        "seed": 1,
        "sequences": 1,
        "length": 1,
        "method": 2,
        "setting": 2,
        "iteration": 4,
    }
    assert_warmup_attributes(ds, learning.SCHEMA)
    assert ds["held_out"].attrs["units"] == "nat" and ds["held_out"].attrs["long_name"]
    assert not bool(ds["done"].sel(family="bell", n_states=6).any())  # not in the grid
    assert not bool(ds["in_grid"].sel({"family": "bell", "n_states": 6, "method": "lowrank"}).any())
    every = ds.sel({"family": "bell", "n_states": 8, "method": "topk_transitions", "setting": 8.0})
    assert float(abs(every["held_out_gap"]).max()) < 1e-12  # k = n: exact EM
    exact = ds["held_out_exact"].sel(family="dirichlet", n_states=6)
    np.testing.assert_array_equal(  # one reference shared by the problem's cells
        exact.sel({"method": "topk_transitions", "setting": 2.0}),
        exact.sel({"method": "lowrank", "setting": 2.0}),
    )
    assert np.isfinite(ds["held_out"].where(ds["done"])).sum() == 6 * 4
    caplog.clear()
    run([*SMOKE, f"store={path}"], client=client)
    assert "0 cells to compute, 6 already done" in caplog.text
    caplog.clear()
    run([*SMOKE, "learning.seeds=[0,1]", f"store={path}"], client=client)
    assert "6 cells to compute, 6 already done" in caplog.text
    grown = xr.open_zarr(path).load()
    assert grown.sizes["seed"] == 2 and int(grown["done"].sum()) == 12
    np.testing.assert_array_equal(grown["held_out_gap"].sel(seed=0), ds["held_out_gap"].sel(seed=0))
    written = analyze(path, tmp_path / "report")
    text = written.report.read_text()
    assert "## Which approximation reaches within 1% of exact EM first" in text
    assert "topk_transitions 8" in text or "topk_transitions 2" in text or "lowrank 2" in text
    table = text.split("## Which approximation")[1].split("```text\n")[1].split("```")[0]
    best, lines = fastest_within(references(grown)), table.splitlines()[1:]
    assert len(lines) == len(problems(grown)) == 2
    for line, problem in zip(lines, problems(grown), strict=True):  # the verdict: time saved
        saved = float(best.sel(problem)["saved_seconds"])
        assert line.endswith("yes") == (saved > 0) and line.endswith("sooner") == (saved <= 0)
    for name in ("pareto.png", "convergence.png"):
        assert f"![{name}]({name})" in text
        assert np.ptp(imread(tmp_path / "report" / name)[..., :3]) > 0.5
