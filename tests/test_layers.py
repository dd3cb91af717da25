"""The layers import in order: ``import pipeline`` loads no store or cluster library, and the
``HMM`` container with inference loads nothing above them (no family, no HMM LM code, no
corpus, no approximation method). What ``python -X importtime -c "import pipeline.inference"``
lists is what ``sys.modules`` holds afterwards; one process checks both imports."""

import json
import subprocess
import sys

import pytest

from pipeline.models import BUILTIN

STORE_AND_CLUSTER = ("xarray", "zarr", "dask", "distributed", "hydra", "omegaconf")
"""What reading or running a sweep needs, and the library below it does not."""

ABOVE_INFERENCE = (
    "pipeline.models",
    "pipeline.methods",
    "pipeline.hmmlm",
    "pipeline.corpus",
    "pipeline.results",
    "pipeline.sweep",
    *sorted(family.__name__ for family in BUILTIN.values()),
)
"""The packages above ``pipeline.hmm`` and ``pipeline.inference``, and every built-in family."""

CODE = """
import json, sys
import pipeline
package = sorted(sys.modules)
import pipeline.hmm, pipeline.inference
inference = sorted(sys.modules)
print(json.dumps([package, inference, pipeline.open_results is pipeline.results.open_results]))
"""


def _within(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """The ``modules`` that are one of ``packages`` or inside one."""
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in packages)]


@pytest.mark.slow
def test_the_package_and_inference_import_nothing_above_them():
    result = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    package, inference, lazy = json.loads(result.stdout)
    assert _within(package, STORE_AND_CLUSTER) == []
    assert "pipeline.results" not in package
    assert {"pipeline.hmm", "pipeline.inference", "pipeline.limits"} <= set(inference)
    assert _within(inference, STORE_AND_CLUSTER + ABOVE_INFERENCE) == []
    assert lazy  # pipeline.open_results still answers, importing pipeline.results then
