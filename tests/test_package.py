"""The package as the getting-started page installs it without its clone (a wheel built with
``python -m build``, then installed by pip) runs a sweep and its report from a directory that
knows nothing of the repository, with the configs of the repository's top level (``conf/``,
``dask_cluster.yaml``) carried inside it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr

from sweeping import on_path

REPOSITORY = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # a wheel is built; the installed copy compiles anew


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package's wheel built from a copy of its sources and installed into a folder of
    its own (``--target``; its dependencies are this environment's): that folder. ``python -m
    build`` makes the source distribution, then the wheel from it: the wheel the docs' ``python
    -m build --wheel`` makes from the tree, and one made from what the source distribution
    carries (``MANIFEST.in``)."""
    root = tmp_path_factory.mktemp("package")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "dask_cluster.yaml"):
        shutil.copy(REPOSITORY / name, source / name)
    for name in ("pipeline", "conf"):
        shutil.copytree(
            REPOSITORY / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(root / "dist"), str(source)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (root / "dist").glob("topp_pipeline-*-py3-none-any.whl")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    target = root / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    return target


def _run(*command: str, cwd: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *command],
        cwd=cwd,
        env=on_path(site),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_an_installed_package_sweeps_and_reports_from_anywhere(installed, tmp_path):
    where = _run(
        "-c",
        "import pipeline\n"
        "from pipeline.sweep.config import CONFIG_DIR, SHIPPED_CLUSTERS\n"
        "print(pipeline.__file__, CONFIG_DIR, SHIPPED_CLUSTERS)",
        cwd=tmp_path,
        site=installed,
    )
    package = installed / "pipeline"
    assert where.stdout.split() == [
        str(package / "__init__.py"),
        str(package / "conf"),
        str(package / "dask_cluster.yaml"),
    ], where.stderr
    assert (package / "py.typed").is_file()  # a type checker reads the package's annotations
    version = _run("-m", "pipeline.sweep", "--version", cwd=tmp_path, site=installed)
    assert version.stdout.strip() == f"pipeline {_version()}", version.stderr
    swept = _run(
        "-m",
        "pipeline.sweep",
        "experiment=smoke",
        "grid.families=[bell]",
        "grid.n_states=[20]",
        "grid.seeds=[0]",
        "grid.methods={topp:[0.9],topk:[3]}",
        "grid.modes=[filter]",  # one mode: the installed copy compiles its kernels anew
        "cluster.n_workers=1",
        "cluster.dashboard_address=:0",
        cwd=tmp_path,
        site=installed,
    )
    assert swept.returncode == 0, swept.stderr
    ds = xr.open_zarr(tmp_path / "outputs" / "smoke" / "results.zarr")
    assert bool(ds.done.where(ds.in_grid, True).all()) and int(ds.done.sum()) == 2
    report = _run(
        "-m", "pipeline.analyze", "outputs/smoke/results.zarr", cwd=tmp_path, site=installed
    )
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "outputs" / "smoke" / "results_report" / "report.md").is_file()


def test_the_installed_configs_are_the_repositorys_top_level_ones(installed):
    """The wheel carries ``conf/`` and ``dask_cluster.yaml`` byte for byte as the repository's
    top level holds them (``pipeline/conf/``, ``pipeline/dask_cluster.yaml``), and no other
    file in ``pipeline/conf``."""
    package = installed / "pipeline"
    carried, top = _files(package / "conf"), _files(REPOSITORY / "conf")
    assert sorted(carried) == sorted(top) and "config.yaml" in top
    for name, path in top.items():
        assert carried[name].read_bytes() == path.read_bytes(), name
    shipped = (package / "dask_cluster.yaml").read_bytes()
    assert shipped == (REPOSITORY / "dask_cluster.yaml").read_bytes()


def _files(folder: Path) -> dict[str, Path]:
    """Every file under ``folder`` by its path relative to it."""
    return {
        path.relative_to(folder).as_posix(): path for path in folder.rglob("*") if path.is_file()
    }


def _version() -> str:
    for line in (REPOSITORY / "pyproject.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise AssertionError("pyproject.toml has no version")


def test_the_library_tests_helpers_import_neither_hydra_nor_dask():
    """The library's tests need no Hydra: their helpers import none (nor Dask, nor the
    sweep); the sweep's helpers are in ``sweeping``."""
    code = (
        "import sys, helpers\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('hydra', 'omegaconf', "
        "'dask', 'distributed') or m.startswith('pipeline.sweep')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    )
    assert out.stdout.strip() == "[]"
