"""What this package registers passes the contract suites of ``pipeline`` (``pipeline.testing``),
found by its entry points as a sweep finds it: ``pip install -e examples/pipeline-ring``, then
``pytest examples/pipeline-ring``."""

import pytest

from pipeline.testing import check_family, check_kind, check_method


@pytest.mark.parametrize("reach", [1, 3])
def test_the_ring_family(reach):
    check_family("ring", 12, reach=reach, noise=0.05)


def test_the_threshold_method():
    """On its own family and a built-in one; a tau outside [0, 1) is refused in one line."""
    check_method(
        "threshold",
        [0.0, 0.05, 0.2],
        families={"ring": {"reach": 3}, "bell": {}},
        bad=[-0.1, 1.0],
        message=r"tau must be in \[0, 1\)",
    )


def test_the_ring_mixing_kind():
    check_kind("ring_mixing", "ring_mixing.n_states=[6,8]", "ring_mixing.horizon=5")
