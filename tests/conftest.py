"""Hypothesis profiles ('ci', the default, is derandomized so CI runs are repeatable) and the
session's smoke sweep."""

import os

import pytest
from hypothesis import settings

from helpers import TINY, sweep

settings.register_profile("ci", deadline=None, max_examples=60, derandomize=True)
settings.register_profile("dev", deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    """A real smoke sweep on a 2-worker LocalCluster: (store path, completed process)."""
    cwd = tmp_path_factory.mktemp("smoke")
    result = sweep(*TINY, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return cwd / "outputs" / "smoke" / "results.zarr", result
