"""A kind's sweep module as the engine runs it (``pipeline.sweep.kind.Sweep``): the optional
members in place, a module without them swept with the defaults."""

import dataclasses

import numpy as np

from pipeline.kinds.coupled import sweep as coupled_module
from pipeline.kinds.methods import sweep as methods_module
from pipeline.results.registry import KINDS
from pipeline.sweep import run
from pipeline.sweep.kind import Sweep, installed, load


def defaults() -> dict:
    return {field.name: field.default for field in dataclasses.fields(Sweep)}


def test_a_kind_without_verify_or_check_memory_loads_with_the_defaults_and_sweeps(client, tmp_path):
    assert not hasattr(coupled_module, "verify") and not hasattr(coupled_module, "check_memory")
    kind = load(KINDS.lookup("coupled"))
    assert kind.submit is coupled_module.submit and kind.SCHEMA is coupled_module.SCHEMA
    assert kind.verify is defaults()["verify"]
    assert kind.check_memory is defaults()["check_memory"]
    assert installed()["coupled"] == kind
    path = tmp_path / "coupled.zarr"
    overrides = ["coupled.chains=[2]", "coupled.eps=[0.3]", "coupled.observe=[chain]"]
    ds = run(["experiment=coupled_smoke", *overrides, f"store={path}"], client=client)
    assert int(ds.in_grid.sum()) == 1 and not ds.failed.any()
    assert np.isfinite(ds.tv_mean_field.values).any()


def test_a_kind_with_verify_and_check_memory_keeps_its_own():
    kind = installed()["methods"]
    assert kind.verify is methods_module.verify
    assert kind.check_memory is methods_module.check_memory
    assert kind.verify is not defaults()["verify"]
