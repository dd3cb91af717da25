import numpy as np
import pytest
import xarray as xr
from matplotlib.image import imread
from test_grid import composed

from pipeline.analysis import analyze, mixing_table, payoff_table, summary_table
from pipeline.analyze import main
from pipeline.grid import Grid
from pipeline.paper import CLAIMS, PAPER_SIZES, compare
from pipeline.results import payoff
from pipeline.store import _template

FIGURES = ("runtime.png", "tv.png", "sparsity_speedup.png", "payoff.png")


def test_analysis_of_a_smoke_store(smoke, tmp_path):
    report = analyze(smoke[0], tmp_path / "out")
    assert report == tmp_path / "out" / "report.md"
    text = report.read_text()
    for name in FIGURES:
        image = imread(tmp_path / "out" / name)
        assert image.shape[0] > 200 and image.shape[1] > 400
        assert np.ptp(image[..., :3]) > 0.5  # something is drawn
        assert f"![{name}]({name})" in text
    table = text.split("## Beside the paper")[1].split("## When top-p pays")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "quantity" not in line]
    assert len(rows) == len(CLAIMS)
    absent = sum(c.family == "lm" or c.p == 0.7 for c in CLAIMS)  # smoke has p 0.5 and 0.9
    assert sum("| not run |" in row for row in rows) == absent
    compared = [row for row in rows if "| bell," in row and "| not run |" not in row]
    assert compared and all("differs" in row and "the paper n=800" in row for row in compared)
    payoff_rows = text.split("## When top-p pays")[1].split("## Minimal mixing rate")[0]
    assert "| prediction | 24 |" in payoff_rows and "| filtering | 24 |" in payoff_rows  # 3x2x2x2


def test_command_line(smoke, tmp_path, capsys):
    assert main([str(smoke[0]), "--out", str(tmp_path / "r")]) == 0
    assert "report:" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing.zarr")])


def paper_dataset(changes=None):
    """The paper experiment's grid filled with the paper's own numbers."""
    grid = Grid.from_config(composed("experiment=paper"))
    ds, _ = _template(grid, {})
    ds["done"][:] = True
    ds["gamma"][:] = 0.1
    for claim in CLAIMS:
        where = dict(family=claim.family, n_states=PAPER_SIZES[claim.family], p=claim.p)
        value = (changes or {}).get(
            (claim.quantity, claim.family, claim.p, claim.mode), claim.value
        )
        if claim.kind == "above":
            value = value * 1.01
        if claim.quantity == "sparsity":
            ds["sparsity"].loc[where] = value
        elif claim.quantity == "speedup":
            ds["speedup"].loc[{**where, "mode": claim.mode}] = value
        else:
            ds["tv"].loc[{**where, "mode": claim.mode, "t": grid.horizon}] = value
    return ds


def test_the_papers_own_numbers_all_match():
    rows = compare(paper_dataset())
    assert [r.status for r in rows] == ["matches"] * len(CLAIMS)


def test_a_different_number_is_marked_with_a_reason():
    rows = compare(
        paper_dataset(
            {("tv", "bell", 0.9, "predict"): 0.3, ("sparsity", "lm", 0.9, "predict"): 0.5}
        )
    )
    differing = {
        (r.claim.quantity, r.claim.family, r.claim.p): r for r in rows if r.status == "differs"
    }
    assert set(differing) == {("tv", "bell", 0.9), ("sparsity", "lm", 0.9)}
    assert "random state" in differing["tv", "bell", 0.9].reason
    assert "keeps 50% of its transitions" in differing["sparsity", "lm", 0.9].reason


def test_tables_name_every_model(smoke):
    ds = xr.open_zarr(smoke[0]).load()
    assert mixing_table(ds).count("| bell, n=") == 2
    assert "informative" in mixing_table(ds) or "trivial" in mixing_table(ds)
    assert len(summary_table(ds).splitlines()) == 1 + 3 * 2 * 2


def test_payoff_recovers_a_known_law():
    # speedup = 0.2 / kept exactly, with every cell of one model not done: fit -1, 0.2.
    ds = paper_dataset()
    kept = xr.DataArray(np.linspace(0.01, 0.9, ds.sizes["p"]), dims="p") * xr.DataArray(
        [1.0, 0.5, 0.25], dims="family"
    )
    ds["sparsity"][:] = (1 - kept).broadcast_like(ds["sparsity"])
    ds["speedup"][:] = (0.2 / kept).broadcast_like(ds["speedup"])
    ds["done"][:] = ds["in_grid"].broadcast_like(ds["done"])  # bell, uniform 800; lm 7620
    ds["done"].loc[{"family": "lm"}] = False
    ds["speedup"].loc[{"family": "lm"}] = 1e6  # must be ignored: not done
    fit = payoff(ds, "predict")
    assert fit.kept.size == 2 * ds.sizes["p"] * ds.sizes["seed"]
    assert fit.exponent == pytest.approx(-1, abs=1e-9)
    assert fit.scale == pytest.approx(0.2, rel=1e-9)
    assert fit.break_even == pytest.approx(0.2, rel=1e-9)
    assert "| prediction | 18 | 6 | 0.2 kept^-1.00 | 0.2 |" in payoff_table(ds)
    ds["speedup"][:] = (1e3 / kept).broadcast_like(ds["speedup"])  # crosses 1 at kept = 1000
    assert np.isnan(payoff(ds, "predict").break_even)  # no extrapolation beyond the cells
    assert "| prediction | 18 | 18 | 1e+03 kept^-1.00 | none in range |" in payoff_table(ds)
