"""The coupled sweep (seed 001): config errors, its grid, a cell, one real run with resume."""

import logging

import numpy as np
import pytest
import xarray as xr
from matplotlib.image import imread

from pipeline.analysis import analyze
from pipeline.coupled import exact
from pipeline.coupled.family import build
from pipeline.kinds.coupled import sweep as coupled
from pipeline.kinds.coupled.grid import CoupledCell
from pipeline.kinds.coupled.tasks import coupled_cell
from pipeline.sweep import run
from pipeline.sweep.config import ConfigError, validate

from sweeping import assert_warmup_attributes, composed


@pytest.mark.parametrize(
    "experiment, override, expected",
    [
        (
            "coupled_smoke",
            "coupled.chains=[1]",
            "coupled.chains: 1 is not allowed; allowed: integers >= 2",
        ),
        (
            "coupled_smoke",
            "coupled.n_states=[1]",
            "coupled.n_states: n_states must be an integer >= 2, got 1",
        ),
        (
            "coupled_smoke",
            "coupled.eps=[1.5]",
            "coupled.eps: 1.5 is not allowed; allowed: numbers in [0, 1]",
        ),
        ("coupled_smoke", "coupled.alpha=0", "coupled.alpha: alpha must be > 0, got 0"),
        (
            "coupled_smoke",
            "coupled.n_observations=0",
            "coupled.n_observations: n_observations must be an integer >= 1",
        ),
        (
            "coupled_smoke",
            "coupled.observe=[both]",
            "coupled.observe: observe='both' is not allowed; allowed: chain, set",
        ),
        (
            "coupled_smoke",
            "coupled.topp=[0]",
            "coupled.topp: 0.0 is not allowed; allowed: numbers in (0, 1]",
        ),
        (
            "coupled_smoke",
            "+coupled.relational.sonata=[{}]",
            "coupled.relational.sonata: no such spec; allowed: string_quartet",
        ),
        (
            "coupled_smoke",
            "+coupled.relational.string_quartet=[{violin: 2}]",
            "unknown type 'violin' in a domain; allowed: voice, note, octave",
        ),
        (
            "coupled_smoke",
            "+coupled.relational.string_quartet=[{voice: 9}]",
            "a domain keeps 9 constants of voice; allowed: 1 to 4",
        ),
        (
            "coupled",
            "coupled.observe=[set]",
            "coupled.observe: ['set'] has no chain; relational specs",
        ),
        (
            "coupled",
            "coupled.relational.string_quartet=[2]",
            "the domain 2 is not allowed; allowed: a mapping",
        ),
        (
            "coupled",
            "coupled.exact_max_states=100000",
            "allowed: 1 to 5000 (exact Viterbi and top-p",
        ),
        (
            "coupled",
            "coupled.budget=-1",
            "coupled.budget: -1.0 is not allowed; allowed: numbers >= 0",
        ),
        (
            "coupled",
            "+coupled.n_states.5=[3]",
            "coupled.n_states.5: 5 chains are not in coupled.chains",
        ),
        (
            "coupled",
            "coupled.relational.string_quartet=[{voice: 1}]",
            "grounds to 1 chain(s) observing chain; allowed: at least 2 chains",
        ),
    ],
)
def test_bad_coupled_settings_are_one_line_errors(experiment, override, expected):
    with pytest.raises(ConfigError) as error:
        validate(composed(f"experiment={experiment}", override))
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_a_relational_domain_twice_is_a_one_line_error():
    with pytest.raises(ConfigError) as error:
        validate(
            composed(
                "experiment=coupled",
                "coupled.relational.string_quartet=[{voice: 2, octave: 1},{voice: 2, octave: 1}]",
            )
        )
    message = str(error.value)
    assert (
        message.startswith("coupled.relational.string_quartet: the domain") and "\n" not in message
    )
    assert "allowed: one domain per (chains, n_states)" in message


def test_grid_of_the_experiment():
    grid = coupled.grid(composed("experiment=coupled"))
    assert grid.models == ("coupled", "string_quartet")
    assert grid.shapes["string_quartet"] == ((2, 12), (3, 12), (4, 4), (4, 48))
    assert (
        grid.chains == (2, 3, 4)
        and 48 in grid.n_states
        and grid.observed("string_quartet") == ("chain",)
    )
    in_grid = grid.in_grid(coupled.SCHEMA.in_grid_dims)
    assert in_grid.shape == (2, 3, len(grid.n_states), 2)
    assert in_grid.sum() == 12 * 2 + 4  # the family's 12 shapes with both observations, 4 specs
    assert len(grid.cells()) == in_grid.sum() * len(grid.eps) * len(grid.seeds)
    cells = grid.cells()
    assert cells[0].n_states ** cells[0].chains == 48**4  # the largest joint chain first


def test_a_cell_compares_every_method_against_exact():
    cfg = composed("experiment=coupled_smoke", "coupled.horizon=12")
    grid = coupled.grid(cfg)
    values = coupled_cell(
        CoupledCell("coupled", 2, 3, 0.3, 0, "chain"), grid.domains, grid.settings
    )
    assert values.tv_mean_field.shape == (13,) and values.tv_topp.shape == (1, 13)
    assert 0 < values.tv_mean_field.max() < 1
    assert values.viterbi_logprob_gap >= 0 and 0 <= values.viterbi_hamming <= 1
    assert values.log_joint_exact >= max(values.log_joint_viterbi, values.log_joint_truth)
    assert values.n_joint == 9 and values.runtime_exact > 0
    # the same model, path and observations, redone: the exact evidence matches
    model = build(2, 3, 0, eps=0.3, n_observations=3, observe="chain")
    rng = np.random.default_rng([0, 0xC0DE])
    _, observations = model.sample(13, rng)
    observations[np.arange(13) % 2 != 0] = -1
    assert values.log_evidence == pytest.approx(exact.smoothing(model, observations).log_evidence)


def test_without_exact_the_full_quartet_still_checks_its_answers():
    cfg = composed("experiment=coupled", "coupled.horizon=6", "coupled.repeats=1")
    grid = coupled.grid(cfg)
    values = coupled_cell(
        CoupledCell("string_quartet", 4, 48, 0.2, 0, "chain"), grid.domains, grid.settings
    )
    assert values.n_joint == 48**4
    for name in ("tv_mean_field", "tv_topp", "viterbi_hamming", "runtime_exact"):
        assert np.isnan(getattr(values, name)), name  # the store's NaN: no exact run
    # the chain-wise path is more probable than the sampled one, as a MAP estimate should be
    assert values.log_joint_viterbi > values.log_joint_truth
    assert 0 < values.truth_mean_field <= 1 and values.converged == 1.0


def test_coupled_smoke_runs_resumes_and_reports(client, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pipeline.sweep")
    path = tmp_path / "results.zarr"
    run(["experiment=coupled_smoke", f"store={path}"], client=client)
    assert "8 cells to compute, 0 already done" in caplog.text
    ds = xr.open_zarr(path).load()
    assert ds.attrs["kind"] == "coupled" and ds["done"].sum() == 8
    assert dict(ds.sizes) == {
        "model": 1,
        "chains": 2,
        "n_states": 1,
        "eps": 2,
        "seed": 1,
        "observe": 2,
        "p": 1,
        "t": 9,
    }
    for name in (
        "tv_mean_field",
        "viterbi_hamming",
        "viterbi_logprob_gap",
        "iterations",
        "runtime_exact",
        "runtime_mean_field",
        "runtime_viterbi",
    ):
        assert ds[name].attrs["units"] and ds[name].attrs["long_name"]
    assert_warmup_attributes(ds, coupled.SCHEMA)
    independent = ds.sel(eps=0.0, observe="chain")
    assert float(independent["tv_mean_field"].max()) < 1e-9
    assert float(independent["viterbi_hamming"].max()) == 0
    assert float(ds["tv_mean_field"].sel(eps=0.3).max()) > 1e-4
    caplog.clear()
    run(["experiment=coupled_smoke", f"store={path}"], client=client)
    assert "0 cells to compute, 8 already done" in caplog.text
    report = analyze(path, tmp_path / "report").report.read_text()
    assert "| coupled | 3 | 3 | set | 27 |" in report
    for name in ("accuracy.png", "equal_runtime.png", "cost.png"):
        assert f"![{name}]({name})" in report
        assert np.ptp(imread(tmp_path / "report" / name)[..., :3]) > 0.5
