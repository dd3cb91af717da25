"""Hypothesis profiles ('ci', the default, is derandomized so CI runs are repeatable), the
session's smoke sweep and its real cluster for sweeps run in this process, and the markers:
``cluster`` (the test kit's Slurm or sshd, ``tests/clusters``), ``slow`` (a test that
starts a process: a sweep from the command line, the smoke sweep, a build), so ``pytest -m
"not slow and not cluster"`` runs the library and the sweeps in this process, and
``dynamax`` (a comparison with dynamax, which needs JAX: the bench extra), deselected where
dynamax is not installed, so the test extra's suite skips nothing it could run.

The suite runs in one process per core (pytest-xdist, ``pyproject.toml``'s ``addopts``;
``-n 0`` runs it here). Tests that share something costly stay in one process
(``xdist_group``, ``shared``): the cluster kit's servers, the smoke sweep, a module's
fixture."""

import importlib.util
import inspect
import os
import re
import subprocess

import pytest
from distributed import Client, LocalCluster
from hypothesis import settings

from helpers import readme_commands

settings.register_profile("ci", deadline=None, max_examples=60, derandomize=True)
settings.register_profile("dev", deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    """The README's worked example, its smoke sweep run as written there (on the default
    local cluster): (store path, completed process)."""
    cwd = tmp_path_factory.mktemp("smoke")
    (command,) = [
        c for c in readme_commands() if c[1:] == ["-m", "pipeline.sweep", "experiment=smoke"]
    ]
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return cwd / "outputs" / "smoke" / "results.zarr", result


@pytest.fixture(scope="session")
def client():
    """A real 2-worker LocalCluster (worker processes, loopback) that tests sweeping in this
    process share through ``pipeline.sweep.run(..., client=client)``; it stays open."""
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )
    with cluster, Client(cluster) as client:
        yield client


STARTS_A_PROCESS = re.compile(r"\b(start_sweep|sweep|subprocess\.\w+)\(")
"""What a test that starts a process calls (``sweeping.sweep``, ``subprocess.run``...)."""


DYNAMAX = importlib.util.find_spec("dynamax") is not None
"""Whether dynamax is installed (``pip install -e ".[test,bench]"``), without importing JAX."""


def pytest_report_header() -> str | None:
    if not DYNAMAX:
        return 'dynamax: not installed, its comparisons deselected (pip install -e ".[bench]")'
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    if not DYNAMAX:
        deselected = [item for item in items if item.get_closest_marker("dynamax")]
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not item.get_closest_marker("dynamax")]
    for item in items:
        if "clusters" in item.path.parts:
            item.add_marker(pytest.mark.cluster)
        function = getattr(item, "function", None)
        source = inspect.getsource(function) if function is not None else ""
        if "smoke" in getattr(item, "fixturenames", ()) or STARTS_A_PROCESS.search(source):
            item.add_marker(pytest.mark.slow)
        group = shared(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def shared(item) -> str | None:
    """What ``item`` shares with other tests that is costly to make twice, so that they run
    in one process: the cluster kit (``tests/clusters``) and the smoke sweep (``smoke``),
    one group, as the kit's sweeps are compared with the smoke sweep's store; a
    module-scoped fixture (the module); None: nothing."""
    fixtures = getattr(item, "_fixtureinfo", None)
    definitions = fixtures.name2fixturedefs if fixtures is not None else {}
    if "clusters" in item.path.parts or "smoke" in definitions:
        return "kit and smoke"
    if any(d.scope == "module" for defs in definitions.values() for d in defs):
        return str(item.path)
    return None
