"""Entry-point plug-ins: real distributions on sys.path (a ``.dist-info`` folder and a module)
found by ``importlib.metadata`` as an installed package's would be, and the example package of
``examples/`` installed by pip into a folder of its own and swept end to end; the running
environment is never changed."""

import importlib.metadata
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import xarray as xr

from pipeline.analysis import analyze
from pipeline.inference import predict
from pipeline.methods import BUILTIN as BUILTIN_METHODS
from pipeline.metrics import total_variation
from pipeline.models import BUILTIN as BUILTIN_FAMILIES
from pipeline.models import build_model
from pipeline.models import file as file_family
from pipeline.plugins import PluginError, Registry
from pipeline.sweep.config import ConfigError, validate

from sweeping import TINY, composed, install, on_path, sweep

GOOD = """
import numpy as np
from pipeline.models import HMM

SEEDED = False


def build(n_states, seed=0, *, stay: float = 0.5):
    T = np.full((n_states, n_states), (1 - stay) / (n_states - 1))
    np.fill_diagonal(T, stay)
    return HMM(np.full(n_states, 1 / n_states), T, np.eye(n_states))
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def families() -> Registry:
    return Registry("model family", "pipeline.families", BUILTIN_FAMILIES)


def test_a_plugin_family_is_listed_after_the_builtins_and_builds(site):
    install(site, "goodpkg", {"good_family": GOOD}, {"pipeline.families": {"mine": "good_family"}})
    registry = families()
    names = list(registry)  # plug-ins the environment holds besides (pipeline-ring) come too
    assert names[: len(BUILTIN_FAMILIES)] == list(BUILTIN_FAMILIES) and "mine" in names
    hmm = registry["mine"].build(4, stay=0.7)
    np.testing.assert_allclose(hmm.transition.diagonal(), 0.7)
    assert registry.lookup("bell") is BUILTIN_FAMILIES["bell"]
    assert registry.origin("mine") == "goodpkg 0.1" and registry.origin("bell") is None
    with pytest.raises(ValueError, match=r"unknown model family 'nope'; allowed: weather, .*mine"):
        registry.lookup("nope")


def test_a_broken_plugin_fails_in_one_line_when_used_and_only_warns_otherwise(site):
    install(
        site,
        "brokenpkg",
        {"broken_family": "import not_a_module_anywhere\n", "good_family": GOOD},
        {"pipeline.families": {"broken": "broken_family", "mine": "good_family"}},
    )
    registry = families()
    with pytest.warns(RuntimeWarning, match="broken"):
        names = list(registry)
    assert "broken" not in names and "mine" in names
    assert registry["bell"] is BUILTIN_FAMILIES["bell"]
    with pytest.raises(PluginError) as error:
        registry.lookup("broken")
    message = str(error.value)
    assert "\n" not in message
    assert "entry point broken = broken_family (brokenpkg 0.1)" in message
    assert "ModuleNotFoundError: No module named 'not_a_module_anywhere'" in message


def test_a_plugin_named_like_a_builtin_is_an_error_naming_its_entry_point(site):
    install(
        site, "clashpkg", {"clash_method": GOOD}, {"pipeline.methods": {"topk": "clash_method"}}
    )
    registry = Registry("method", "pipeline.methods", BUILTIN_METHODS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "topk" not in list(registry)
    with pytest.raises(PluginError, match=r"topk = clash_method \(clashpkg 0.1\) takes the name"):
        registry.lookup("topk")
    assert registry.lookup("topp") is BUILTIN_METHODS["topp"]


def test_a_builtin_named_as_an_entry_point_is_loaded_on_first_use():
    """A registry below what it lists (``pipeline.results.registry``) names its built-ins as
    entry points do, ``module:attribute``; listing them imports nothing."""
    registry = Registry("codec", "pipeline.nothing", {"dumps": "json:dumps", "bell": "nope:x"})
    assert registry.names() == ["dumps", "bell"]
    assert registry["dumps"] is json.dumps and registry.lookup("dumps") is json.dumps
    with pytest.raises(ModuleNotFoundError, match="nope"):
        registry["bell"]


# --- end to end: the example package pip-installed, a saved .npz, broken and clashing plug-ins

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pipeline-ring"


def _distributions() -> list[str]:
    """Every distribution of this environment with its version and location."""
    return sorted(
        f"{d.metadata['Name']} {d.version} {d.locate_file('')}"
        for d in importlib.metadata.distributions()
    )


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """``examples/pipeline-ring`` pip-installed into a folder of its own (``--target``), from a
    copy of its sources (a build writes beside them): the folder, to put on the path. The
    running environment is left exactly as it was, an installed copy of the example included
    (checked after the module's tests)."""
    before = _distributions()
    root = tmp_path_factory.mktemp("example")
    shutil.copytree(EXAMPLE, root / "source", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    target = root / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(root / "source")],
        check=True,
        capture_output=True,
    )
    yield target
    assert _distributions() == before, "the plug-in tests changed the running environment"


@pytest.fixture(scope="module")
def troubles(tmp_path_factory):
    """A folder holding a broken plug-in family and a method named like a built-in."""
    root = tmp_path_factory.mktemp("troubles")
    install(
        root,
        "brokenpkg",
        {"broken_family": "import not_a_module_anywhere\n"},
        {"pipeline.families": {"broken": "broken_family"}},
    )
    install(
        root, "clashpkg", {"clash_method": GOOD}, {"pipeline.methods": {"topk": "clash_method"}}
    )
    return root


def test_the_example_plugins_and_a_saved_model_are_swept_and_reported(example, troubles, tmp_path):
    """The example's family and method beside a built-in method and a model from a file, with a
    broken and a clashing plug-in installed that the sweep does not use."""
    hmm = build_model("weather", 6)
    saved = tmp_path / "mine.npz"
    file_family.save(saved, hmm.prior, sp.csr_array(hmm.transition), hmm.emission)
    env = on_path(troubles, example)
    overrides = [
        *TINY,
        "cluster.n_workers=1",
        "methods.grid.families=[ring,file]",
        "methods.grid.n_states={ring:[12]}",
        "methods.model.ring.reach=2",
        f"methods.model.file.path={saved}",
        "methods.grid.methods={topp:[0.9],threshold:[0.1]}",
        "methods.grid.seeds=[0]",
        "methods.grid.horizon=6",
        "methods.timing.min_seconds=0",
        "store=mine.zarr",
    ]
    result = sweep(*overrides, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "broken" not in result.stderr  # a plug-in family is imported only when used
    ds = xr.open_zarr(tmp_path / "mine.zarr").load()
    assert json.loads(ds.attrs["grid"])["model"]["ring"] == {"noise": 0.05, "reach": 2}
    assert ds.family.values.tolist() == ["ring", "file"]
    assert ds.n_states.values.tolist() == [6, 12] and ds.method.values.tolist() == [
        "topp",
        "threshold",
    ]
    assert bool(ds.done.where(ds.in_grid, True).all()) and int(ds.done.sum()) == 16
    assert "threshold: tau" in ds.setting.attrs["long_name"]

    sys.path.insert(0, str(example))
    try:
        from ringhmm import method  # the example, as installed
    finally:
        sys.path.remove(str(example))
    approximation = method.approximate(build_model("file", 6, path=str(saved)), 0.1)
    exact, approximate = predict(hmm, 6), predict(approximation.hmm, 6)
    cell = ds.sel({"family": "file", "n_states": 6, "method": "threshold", "setting": 0.1})
    tv = cell.tv.sel(mode="predict").squeeze()
    np.testing.assert_allclose(tv, total_variation(exact, approximate), atol=1e-12)
    assert float(cell.eps.squeeze()) == pytest.approx(approximation.row_error.max())

    report = analyze(tmp_path / "mine.zarr", tmp_path / "report").report.read_text()
    assert "families ring, file" in report and "threshold (0.1)" in report
    assert "| file, n=6 |" in report and "threshold 0.1" in report

    for override, message in [
        (
            "methods.grid.families=[broken]",
            "error: methods.grid.families: the plug-in model family 'broken' (entry point broken = "
            "broken_family (brokenpkg 0.1)) failed to import: ModuleNotFoundError",
        ),
        (
            "methods.grid.methods={topk:[2]}",
            "error: methods.grid.methods: the plug-in entry point topk = clash_method (clashpkg "
            "0.1) takes the name of the built-in method 'topk'; rename the entry point",
        ),
        (
            "methods.model.ring.nope=1",
            "error: methods.model.ring.nope: unknown parameter 'nope' for model family 'ring'; "
            "allowed: reach, noise",
        ),
        (
            "methods.grid.n_states={ring:[12],file:[7]}",
            f"error: methods.grid.n_states.file: '{saved}' holds an HMM of 6 states, not "
            "n_states=7",
        ),
    ]:
        refused = sweep(*overrides, override, cwd=tmp_path, env=env)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.strip().splitlines()[-1].startswith(message), refused.stderr


def test_the_file_experiment_takes_its_size_from_the_file(tmp_path):
    saved = tmp_path / "mine.npz"
    hmm = build_model("bell", 30)
    file_family.save(saved, hmm.prior, hmm.transition, hmm.emission)
    cfg = composed("experiment=file", f"methods.model.file.path={saved}")
    kind = validate(cfg)
    assert kind.grid(cfg).sizes == {"file": (30,)}
    with pytest.raises(ConfigError, match=r"^methods.model.file.path: the file family needs path="):
        validate(composed("experiment=file"))
    with pytest.raises(
        ConfigError, match=r"^methods.grid.n_states: '.*mine.npz' holds an HMM of 30 states"
    ):
        validate(
            composed(
                "experiment=file", f"methods.model.file.path={saved}", "methods.grid.n_states=[20]"
            )
        )


def test_a_plugin_sweep_kind_is_swept_resumed_and_reported(example, tmp_path):
    """The example's ``ring_mixing`` kind, a sweep of its own: its store holds what its schema
    names, checked against the matrix powers and the definition of gamma; run again it
    resumes; ``pipeline.analyze`` writes its report; its settings are checked like ours."""
    env = on_path(example)
    overrides = [
        "kind=ring_mixing", "ring_mixing.n_states=[6,8]", "ring_mixing.reaches=[1,2]",
        "ring_mixing.horizon=5", "cluster.n_workers=1", "cluster.dashboard_address=:0",
        "store=mixing.zarr",
    ]  # fmt: skip
    first = sweep(*overrides, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    ds = xr.open_zarr(tmp_path / "mixing.zarr").load()
    assert ds.attrs["kind"] == "ring_mixing" and bool(ds.done.all())
    sys.path.insert(0, str(example))
    try:
        from ringhmm import family  # the example, as installed
    finally:
        sys.path.remove(str(example))
    for n in (6, 8):
        for reach in (1, 2):
            T = family.build(n, reach=reach).transition
            overlap = np.minimum(T[:, None, :], T[None, :, :]).sum(-1)  # sum_k min(T_ik, T_jk)
            gamma = float(ds.gamma.sel(n_states=n, reach=reach))
            assert gamma == pytest.approx(overlap.min(), abs=1e-12)
            powers = [np.linalg.matrix_power(T, t) for t in range(6)]
            tv = [0.5 * np.abs(P[0] - P[n // 2]).sum() for P in powers]
            stored = ds.tv.sel(n_states=n, reach=reach).values
            np.testing.assert_allclose(stored, tv, atol=1e-12)
            assert np.all(stored <= (1 - gamma) ** np.arange(6) + 1e-12)

    again = sweep(*overrides, cwd=tmp_path, env=env)
    assert again.returncode == 0 and "0 cells to compute, 4 already done" in again.stderr

    analyzed = subprocess.run(
        [sys.executable, "-m", "pipeline.analyze", "mixing.zarr"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert analyzed.returncode == 0, analyzed.stderr
    report = (tmp_path / "mixing_report" / "report.md").read_text()
    assert "# Ring mixing" in report and (tmp_path / "mixing_report" / "tv.png").stat().st_size

    refused = sweep(*overrides, "training.max_epochs=3", cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        "error: training.max_epochs: is a key of kind=training, which this config does not "
        "choose; allowed: kind=training (or an experiment of that kind) with it"
    )


@pytest.mark.slow
def test_the_example_holds_what_it_registers_to_the_contract_suites(example):
    """The example's own tests (``examples/pipeline-ring/tests``: ``pipeline.testing`` on its
    family, method and kind) pass, run by pytest with the example installed."""
    source = example.parent / "source"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=source, env=on_path(example), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout, result.stdout
