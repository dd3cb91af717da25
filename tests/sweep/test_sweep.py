"""The sweep end to end: a real LocalCluster with worker processes, read back with plain xarray."""

import logging
import re
import urllib.request

import numpy as np
import pytest
import xarray as xr

from pipeline.inference import path_log_probability, predict, smoothing, viterbi
from pipeline.kinds.methods.results import MEASURED
from pipeline.kinds.methods.tasks import observations
from pipeline.methods.topk import topk_hmm
from pipeline.methods.topp import topp_hmm
from pipeline.metrics import minimal_mixing_rate, sparsity, total_variation
from pipeline.models import build_model
from pipeline.sweep import run
from pipeline.sweep.config import ConfigError

from helpers import assert_same_values
from sweeping import TINY, install, on_path, start_sweep, sweep


def test_store_layout(smoke):
    path, result = smoke
    ds = xr.open_zarr(path)
    assert dict(ds.sizes) == {
        "family": 3,
        "n_states": 2,
        "method": 5,
        "setting": 4,
        "seed": 2,
        "mode": 4,
        "t": 11,
    }
    assert ds.method.values.tolist() == ["topp", "topk", "topp_states", "lowrank", "banded_lowrank"]
    assert ds.setting.values.tolist() == [0.5, 0.9, 2.0, 3.0]
    assert int(ds.in_grid.sum()) == 3 * 2 * 6
    assert ds.family.values.tolist() == ["bell", "uniform", "dirichlet"]
    assert bool(ds.done.where(ds.in_grid, True).all()) and not bool(ds.failed.any())
    assert int(ds.done.sum()) == 288
    for name, variable in ds.data_vars.items():
        assert variable.attrs.get("units") and variable.attrs.get("long_name"), name
    for key in (
        "config",
        "versions",
        "git_commit",
        "host",
        "cpu",
        "blas",
        "start_time",
        "end_time",
        "worker_blas_threads",
    ):
        assert ds.attrs[key], key
    assert re.search(r"family  n_states +method  setting  speedup predict", result.stdout)
    assert "288/288 cells" in result.stderr


def test_values_match_the_library(smoke):
    """Recompute a few cells in-process: every coordinate must label its own result."""
    ds = xr.open_zarr(smoke[0]).load()
    for family, n, method, setting, seed in [
        ("bell", 40, "topp", 0.9, 1),
        ("dirichlet", 20, "topp", 0.5, 0),
        ("uniform", 40, "topk", 3.0, 1),
        ("dirichlet", 40, "topp_states", 0.9, 1),
    ]:
        hmm = build_model(family, n, seed=seed)
        if method == "topp_states":
            exact, approximate = predict(hmm, 10), predict(hmm, 10, prune=setting)
            T = hmm.transition
        else:
            top = (topp_hmm if method == "topp" else topk_hmm)(hmm, setting)
            exact, approximate, T = predict(hmm, 10), predict(top, 10), top.transition
        cell = ds.sel({"family": family, "n_states": n, "method": method, "setting": setting})
        cell = cell.sel(seed=seed)
        tv = total_variation(exact, approximate)
        np.testing.assert_allclose(cell.tv.sel(mode="predict"), tv, rtol=0, atol=1e-12)
        assert float(cell.gamma) == pytest.approx(minimal_mixing_rate(hmm.transition))
        assert float(cell.sparsity) == sparsity(T)
        _, observed = observations(hmm, mode="filter", horizon=10, observe_every=2, seed=seed)
        assert (observed[1::2] == -1).all() and (observed[::2] >= 0).all()
        if method == "topp_states":
            continue
        approximated = (topp_hmm if method == "topp" else topk_hmm)(hmm, setting)
        exact, approximate = smoothing(hmm, observed), smoothing(approximated, observed)
        tv = total_variation(exact.posteriors, approximate.posteriors)
        np.testing.assert_allclose(cell.tv.sel(mode="smooth"), tv, rtol=0, atol=1e-12)
        np.testing.assert_allclose(cell.tv_max.sel(mode="smooth"), tv.max(), rtol=0, atol=1e-12)
        best, decoded = viterbi(hmm, observed).path, viterbi(approximated, observed).path
        decode = cell.sel(mode="decode")
        assert float(decode.path_disagreement) == np.mean(best != decoded)
        gap = path_log_probability(hmm, best, observed) - path_log_probability(
            hmm, decoded, observed
        )
        assert float(decode.log_probability_gap) == pytest.approx(gap, rel=1e-12, abs=1e-12)


def test_metrics_are_consistent(smoke):
    raw = xr.open_zarr(smoke[0]).load()
    assert bool((raw.doeblin <= raw.gamma + 1e-12).all())
    ds = raw.drop_vars("error").where(raw.in_grid)
    predicted = ds.sel(mode="predict")
    held = (predicted.tv <= predicted.bound + 1e-9) | predicted.tv.isnull()
    assert bool(held.all())
    assert bool((predicted.tv <= predicted.certificate + 1e-9).sum() == predicted.done.sum() * 11)
    done = ds.done == 1
    stepped = ds.sel(mode=["predict", "filter"])
    assert bool((stepped.runtime_exact.diff("t") >= 0).where(stepped.done == 1, True).all())
    timed = done & ds.speedup.notnull()
    fastest = (ds.runtime_approx_min <= ds.runtime_approx + 1e-12).isel(t=-1)
    assert bool(fastest.where(timed, True).all())
    assert bool((ds.speedup > 0).where(timed, True).all())
    assert bool(ds.log_evidence.sel(mode=["predict", "decode"]).isnull().all())
    assert bool(np.isfinite(ds.log_evidence.sel(mode="filter")).where(done, True).all())
    # the sequence modes: no certificate, TV where they have one, their own measures only
    assert bool(ds.certificate.sel(mode=["smooth", "decode"]).isnull().all())
    smoothed, decoded = ds.sel(mode="smooth"), ds.sel(mode="decode")
    np.testing.assert_array_equal(smoothed.tv_max, smoothed.tv.max("t", skipna=False))
    assert bool(decoded.tv.isnull().all()) and bool(ds.tv_max.sel(mode="decode").isnull().all())
    decodes = (decoded.done == 1) & decoded.paths_equal.notnull()
    assert int(decodes.sum()) == 3 * 2 * 5 * 2  # every method but belief pruning
    assert bool((decoded.log_probability_gap >= -1e-12).where(decodes, True).all())
    equal = (decoded.path_disagreement == 0) == (decoded.paths_equal == 1)
    assert bool(equal.where(decodes, True).all())
    pruning = ds.sel({"method": "topp_states", "mode": ["smooth", "decode"]})
    assert bool(pruning.tv.isnull().all()) and int(pruning.repeats.max()) == 0


def test_rerun_computes_nothing(smoke, client, caplog, capsys):
    path, _ = smoke
    caplog.set_level(logging.INFO, logger="pipeline.sweep")
    run([*TINY, f"store={path}"], client=client)
    assert "0 cells to compute, 288 already done" in caplog.text
    assert "nothing left to do: every cell of" in caplog.text
    assert "cells/s" not in capsys.readouterr().err  # no progress line
    runs = xr.open_zarr(path).attrs["runs"]  # each run's provenance, the first's and this
    assert len(runs) == 2 and runs[0]["start_time"] <= runs[1]["start_time"]
    assert all({"config", "git_commit", "workers", "versions"} <= set(run) for run in runs)


FAILING = """
import os

SETTING = "s"


def check(setting):
    pass


def approximate(hmm, setting):
    with open(os.environ["FAILING_CALLS"], "a") as calls:
        calls.write("called\\n")
    raise ValueError("the failing method fails")
"""
"""A plug-in method whose every cell raises the same ``ValueError``, counting its calls."""


def test_deterministic_failures_are_reported_once_not_retried_and_the_rest_goes_on(tmp_path):
    """A plug-in method that raises in every cell and a family whose model cannot be built:
    their cells fail, the other cells of the same fused task are kept, nothing is tried
    again (``retries=2`` applies only to reasons another attempt may not meet), and the
    terminal gets one line per reason, with no traceback and no advice to rerun."""
    install(
        tmp_path,
        "failingpkg",
        {"failing_method": FAILING},
        {"pipeline.methods": {"failing": "failing_method"}},
    )
    corpus, calls = tmp_path / "tiny.txt", tmp_path / "calls.txt"
    corpus.write_text("one two three four five six seven eight nine ten " * 3)
    env = on_path(tmp_path, FAILING_CALLS=str(calls))
    result = sweep(
        *TINY,
        "grid.families=[bell,lm]",
        "grid.n_states={bell:[20],lm:[40]}",
        f"model.lm.corpus={corpus}",
        "grid.methods={topp:[0.9],failing:[1,2]}",
        "grid.seeds=[0]",
        "grid.modes=[predict,filter]",
        "retries=2",
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-3:] == [
        "4 cells failed (bell, 20, failing, 1.0, 0, predict and 3 more): ValueError: the "
        "failing method fails",
        "6 cells failed (lm, 40, topp, 0.9, 0, predict and 5 more): ValueError: the lm corpus "
        "has 10 word types; n_states=40 needs at least 39 (n_states - 1 words plus the "
        "unknown-word state)",
        "10 cells failed with errors a rerun repeats (above; each cell's in the `error` "
        "variable): fix their cause, then run the same command again.",
    ], result.stderr
    assert "Traceback" not in result.stderr and "Compute Failed" not in result.stderr
    # bell's fused cells share each approximation: the two failing settings are built once
    # each, and their four cells report the error: two calls, where a retry would repeat them
    assert calls.read_text().count("called") == 2
    ds = xr.open_zarr(tmp_path / "outputs" / "smoke" / "results.zarr")
    bell = ds.sel(family="bell", n_states=20)
    assert bool(bell.sel({"method": "topp", "setting": 0.9}).done.all())
    assert not bool(bell.sel({"method": "failing"}).done.any())
    lm = ds.sel(family="lm", n_states=40)
    assert int(lm.failed.sum()) == 6 and int(lm.done.sum()) == 0
    logs = list((tmp_path / "outputs" / "smoke" / "hydra").glob("*/main.log"))
    assert sum(log.read_text().count("failed: ValueError: the failing") for log in logs) == 4


TOKEN = "Zq9xW2vR7tLm4Kp8-0022"
"""A secret given on a multirun's command line for its jobs' environment."""


@pytest.fixture(scope="module")
def multirun(tmp_path_factory):
    """A Hydra multirun of two jobs (horizons 3 and 4) with ``TOKEN`` for their
    environment: (its folder, the completed process)."""
    cwd = tmp_path_factory.mktemp("multirun")
    grid = ["grid.families=[bell]", "grid.n_states=[20]", "grid.seeds=[0]", "grid.modes=[predict]"]
    overrides = [*grid, "grid.methods={topp:[0.5]}", "grid.horizon=3,4"]
    secret = f"+hydra.job.env_set.API_TOKEN={TOKEN}"
    return cwd, sweep("-m", *TINY, *overrides, secret, cwd=cwd)


@pytest.mark.slow
def test_hydra_multirun_gives_each_job_its_own_store(multirun):
    cwd, result = multirun
    assert result.returncode == 0, result.stderr
    stores = sorted((cwd / "outputs" / "multirun").glob("*/*/results.zarr"))
    assert [xr.open_zarr(s).sizes["t"] for s in stores] == [4, 5]


@pytest.mark.slow
def test_no_file_of_a_multirun_holds_a_secret_of_its_command_line(multirun):
    """Hydra's record of the multirun (multirun.yaml), the jobs' logs and stores: none holds
    a token given for the jobs' environment; each job runs with its methods replaced, as a
    run's are."""
    cwd, result = multirun
    assert result.returncode == 0, result.stderr
    files = [path for path in cwd.rglob("*") if path.is_file()]
    assert len(files) > 10 and not [p for p in files if TOKEN.encode() in p.read_bytes()]
    (record,) = cwd.glob("outputs/multirun/*/multirun.yaml")
    assert not record.is_symlink() and "API_TOKEN: <redacted>" in record.read_text()
    stores = sorted(cwd.glob("outputs/multirun/*/*/results.zarr"))
    assert len(stores) == 2 and all(list(xr.open_zarr(s).method.values) == ["topp"] for s in stores)


def test_fine_grained_graph_equals_fused_tasks(smoke, client, tmp_path):
    """Small models run fused by default; one task per piece of work must give the same."""
    fine = run(
        ["experiment=smoke", "fuse_states=0", f"store={tmp_path / 'fine.zarr'}"], client=client
    )
    assert_same_values(fine.load(), xr.open_zarr(smoke[0]).load())


def test_structured_models_gamma_parts_doeblin_and_certificate(client, tmp_path):
    overrides = [
        "experiment=smoke",
        f"store={tmp_path / 'structured.zarr'}",
        "grid.families=[bell,peaked]",
        "grid.n_states=[4000,6000]",
        "grid.methods={topp:[0.5,0.9],topk:[3],topp_states:[0.9]}",
        "grid.seeds=[0]",
        "model.bell.structured=true",
        "model.peaked.structured=true",
        "gamma_exact_max_states=5000",
        "timing.repeats=1",  # no runtime is read here: one timed round a cell, not 25
        "timing.max_repeats=1",
    ]
    ds = run(overrides, client=client).load()
    assert ds.gamma_exact.sel(n_states=4000).all() and not ds.gamma_exact.sel(n_states=6000).any()
    np.testing.assert_array_equal(ds.gamma.sel(n_states=6000), ds.doeblin.sel(n_states=6000))
    exact = minimal_mixing_rate(build_model("peaked", 4000, seed=0, structured=True).transition)
    assert float(ds.gamma.sel(family="peaked", n_states=4000, seed=0)) == pytest.approx(exact)
    assert int(ds.done.sum()) == int(ds.in_grid.sum()) * 4
    predicted, filtered = ds.sel(mode="predict"), ds.sel(mode="filter")
    outside = ~ds.in_grid
    assert bool(((predicted.tv <= predicted.certificate + 1e-9) | outside).all())
    assert bool(((predicted.certificate <= predicted.bound + 1e-9) | outside).all())
    assert bool(filtered.certificate.isnull().all())


def test_sizes_beyond_exact_max_states_rely_on_the_certificate(client, tmp_path):
    overrides = ["grid.families=[dirichlet]", "exact_max_states=30", f"store={tmp_path / 'r.zarr'}"]
    ds = run(["experiment=smoke", *overrides], client=client).load()
    small, large = ds.sel(n_states=20), ds.sel(n_states=40)
    measured = small.tv.sel(mode=["predict", "filter"])  # decode has no TV
    assert bool(np.isfinite(measured.where(small.in_grid, 0)).all())
    assert bool(large.tv.isnull().all()) and bool(large.speedup.isnull().all())
    assert int(large.done.sum()) == int(large.in_grid.sum()) * 8
    assert bool(np.isfinite(large.certificate.sel(mode="predict").where(large.in_grid, 0)).all())
    stepped = large.sel(mode=["predict", "filter"])
    assert bool(np.isfinite(stepped.runtime_approx.where(stepped.in_grid, 0)).all())
    run_once = large.sel(mode=["smooth", "decode"]).drop_sel({"method": "topp_states"})
    last = run_once.runtime_approx.isel(t=-1).where(run_once.in_grid, 0)
    assert bool(np.isfinite(last).all())  # the approximation's whole runs, timed alone


def test_run_from_python_with_a_given_client_equals_the_command_line(smoke, client, tmp_path):
    """``pipeline.sweep.run`` composes the same config, uses the client it is given as it is,
    leaves it open, and stores the same values as ``python -m pipeline.sweep``."""
    ds = run(["experiment=smoke", f"store={tmp_path / 'api.zarr'}"], client=client)
    assert client.status == "running" and len(client.scheduler_info()["workers"]) == 2
    cli = xr.open_zarr(smoke[0]).load()
    ds = ds.load()
    assert ds.attrs["grid"] == cli.attrs["grid"] and ds.attrs["workers"] == 2
    values = [name for name in cli.data_vars if name not in MEASURED]
    assert len(values) > 20
    for name in values:  # values, dims, coordinates and every attribute
        xr.testing.assert_identical(ds[name], cli[name])
    with pytest.raises(ConfigError, match=r"^methods\.grid\.horizon: 0 is not allowed"):
        run(["experiment=smoke", "methods.grid.horizon=0"], client=client)


def test_the_dashboard_serves_dasks_status_page_and_the_performance_report_is_saved(tmp_path):
    run = start_sweep(
        *TINY,
        "cluster.n_workers=1",
        "grid.families=[bell]",
        "performance_report=true",
        "timing.min_seconds=0.2",  # still running when the dashboard is read
        "store=r.zarr",
        cwd=tmp_path,
    )
    link = None
    for line in run.stderr:  # the log, as it is written
        found = re.search(r"Dask dashboard: (http://127\.0\.0\.1:\d+/status)", line)
        if found:
            link = found.group(1)
            break
    assert link, "no dashboard link"
    page = urllib.request.urlopen(link, timeout=30).read().decode()
    assert "<title>Dask Diagnostic UI</title>" in page and "bokeh" in page.lower()
    assert "needs bokeh" not in page
    run.communicate(timeout=240)
    assert run.returncode == 0
    report = (tmp_path / "r_performance.html").read_text()
    assert "<title>Dask Performance Report</title>" in report


def test_an_accuracy_only_sweep_stores_the_same_errors_and_no_runtimes(smoke, client, tmp_path):
    overrides = ["timing.enabled=false", f"store={tmp_path / 'accuracy.zarr'}"]
    untimed = run(["experiment=smoke", *overrides], client=client).load()
    timed = xr.open_zarr(smoke[0]).load()
    assert_same_values(untimed, timed)
    done = untimed.done
    for name in [n for n in untimed.data_vars if n.startswith(("runtime_", "speedup"))]:
        assert bool(untimed[name].where(done).isnull().all()), name
        assert "timing.enabled=false" in untimed[name].attrs["missing"], name
    assert int(untimed.repeats.where(done, 0).max()) == 0
