"""The suite's own machinery: tests that share something costly to make twice run in one
process (``conftest.shared``), which pytest-xdist's ``--dist loadgroup`` does by a group
suffix on their node ids."""

import os

import pytest


@pytest.fixture(scope="module")
def module_scoped():
    """Puts the test below in its module's group (``conftest.shared``)."""


def test_tests_sharing_a_module_fixture_are_one_group(request, module_scoped):
    """A test with a module-scoped fixture is in its module's group, and the node id the
    scheduler distributes by carries the group: with pytest 9.2 and pytest-xdist 3.8 it did
    not (pytest-dev/pytest-xdist#1386, hence the test extra's ``pytest<9.2``), and every
    group split silently, the smoke sweep and the cluster kit started in each process."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("one process (-n 0): no test is distributed")
    assert request.node.nodeid.endswith(f"@{request.node.path}")
