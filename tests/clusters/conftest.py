"""Session-scoped real back-ends (``kit``) and how the cluster tests run sweeps on them.

Each test runs ``python -m pipeline.sweep`` in a directory holding a ``dask_cluster.yaml``
of its own (``write_clusters``): every Dask process listens on 127.0.0.1 and every
dashboard on a free loopback port. A back-end that cannot run here skips its tests with
the reason.
"""

import os
import subprocess
import sys
from pathlib import Path

import kit
import numpy as np
import pytest
import xarray as xr
import yaml

from pipeline.kinds.methods.results import MEASURED

from helpers import assert_same_values

SECRET = "pipeline-test-secret-5b0d"
"""A password in the SSH entry and a token in the sweep's environment: no store may hold it."""


def _running(service):
    """Start one of the kit's services for the session, or skip with why it cannot run."""
    try:
        started = service()
    except kit.Unavailable as reason:
        pytest.skip(str(reason))
    try:
        yield started.start()
    finally:
        started.stop()


@pytest.fixture(scope="session")
def slurm():
    """A running one-node Slurm on 127.0.0.1 (its PBS wrappers too)."""
    yield from _running(kit.Slurm)


@pytest.fixture(scope="session")
def sshd():
    """A running sshd on 127.0.0.1 that accepts one generated key."""
    yield from _running(kit.Sshd)


def jobqueue_entry(kind: str, **overrides) -> dict:
    """One-core, one-worker batch jobs whose Dask processes listen on loopback."""
    return {
        "kind": kind,
        "jobs": 2,
        "cores": 1,
        "processes": 1,
        "memory": "1GiB",
        "walltime": "00:10:00",
        "host": "127.0.0.1",
        "dashboard_address": ":0",
        "death_timeout": 3,
        "wait_for_workers": 60,
        **overrides,
    }


def ssh_entry(sshd, **overrides) -> dict:
    """Three host entries on 127.0.0.1 (the first runs the scheduler), one worker each."""
    return {
        "kind": "ssh",
        "hosts": ["127.0.0.1"] * 3,
        "workers_per_host": 1,
        "connect_options": {**sshd.connect_options, "password": SECRET},
        "host": "127.0.0.1",
        "dashboard_address": ":0",
        "wait_for_workers": 60,
        **overrides,
    }


def write_clusters(folder: Path, **entries: dict) -> None:
    """A ``dask_cluster.yaml`` in ``folder`` (it replaces the repository's there)."""
    local = {"kind": "local", "n_workers": 2, "dashboard_address": ":0"}
    (folder / "dask_cluster.yaml").write_text(yaml.safe_dump({"local": local, **entries}))


def sweep_command(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.sweep", "experiment=smoke", *overrides]


def sweep_env(slurm=None) -> dict:
    """The sweep's environment: ``SLURM_CONF`` for Slurm, and a secret token to leak."""
    env = {**os.environ, "PIPELINE_TEST_TOKEN": SECRET}
    return {**env, **slurm.env} if slurm else env


def run_sweep(*overrides: str, cwd: Path, slurm=None, timeout=180) -> subprocess.CompletedProcess:
    """``python -m pipeline.sweep experiment=smoke <overrides>`` in ``cwd``, to the end."""
    return subprocess.run(
        sweep_command(*overrides),
        cwd=cwd,
        env=sweep_env(slurm),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_sweep(*overrides: str, cwd: Path, slurm=None) -> subprocess.Popen:
    """The same sweep in the background, in a process group of its own."""
    return subprocess.Popen(
        sweep_command(*overrides),
        cwd=cwd,
        env=sweep_env(slurm),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def assert_no_secrets(store: Path) -> None:
    """No file of the store holds ``SECRET``, a private key or a certificate; the
    stored config says the SSH password was there and is redacted."""
    for path in store.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in (SECRET.encode(), b"PRIVATE KEY", b"BEGIN CERTIFICATE"):
                assert secret not in data, (path, secret)


def assert_same_results(path: Path, reference: Path, rtol: float = 0.0) -> None:
    """Every variable of the store at ``path`` equals the reference's (within ``rtol`` for
    floats), measurements of the run (``MEASURED``: clocks, memory) aside."""
    store, expected = xr.open_zarr(path).load(), xr.open_zarr(reference).load()
    assert set(store.data_vars) == set(expected.data_vars)
    assert int(store.done.sum()) == int(expected.in_grid.sum()) * 8 and not store.failed.any()
    assert_same_values(store, expected, rtol)
    for name in MEASURED:  # measured where the reference measured (not every step or mode)
        measured = np.isfinite(store[name].where(store.in_grid, 0))
        np.testing.assert_array_equal(measured, np.isfinite(expected[name].where(store.in_grid, 0)))
