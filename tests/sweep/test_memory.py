"""A cell's memory, estimated before anything runs, against what its model and approximation
really take."""

import time

import pytest

from pipeline.methods import approximate
from pipeline.models import build_model
from pipeline.sweep import kinds
from pipeline.sweep.cluster import MEMORY, connect, memory_resource, worker_memory
from pipeline.sweep.kinds.methods import memory

from helpers import composed


@pytest.mark.parametrize(
    ("family", "params", "method", "setting"),
    [
        ("bell", {"structured": True}, "topp", 0.9),  # peaks on a background: grows as n
        ("dirichlet", {}, "topk", 5),  # dense rows: grows as n^2
        ("peaked", {"structured": True}, "topp", 0.5),
    ],
)
def test_the_estimate_extrapolates_what_a_larger_model_takes(family, params, method, setting):
    n = 8192
    found = memory.estimate(family, n, params, method, setting, steps=51)
    hmm = build_model(family, n, **params)
    model = memory._model_bytes(hmm)
    approximation = memory._model_bytes(approximate(hmm, method, setting).hmm)
    assert found.model == pytest.approx(model, rel=0.1)
    assert found.approximation == pytest.approx(approximation, rel=0.1)
    assert found.total > model + approximation


def test_small_cells_and_fixed_size_families_are_not_estimated(tmp_path):
    assert memory.estimate("bell", 4096, {}, "topp", 0.9, steps=51) is None
    assert memory.estimate("weather", 6, {}, "topp", 0.9, steps=51) is None


def test_a_large_cells_tasks_reserve_their_estimate_of_a_workers_declared_memory():
    cfg = composed(
        "cluster.n_workers=1",
        "cluster.memory_limit=3GiB",
        "cluster.dashboard_address=:0",
        "grid.families=[bell]",
        "grid.n_states=[20,5000]",
        "grid.methods={topp:[0.9]}",
        "grid.modes=[predict]",
        "grid.seeds=[0]",
    )
    kind = kinds.validate(cfg)
    grid = kind.grid(cfg)
    with connect(cfg.cluster) as client:
        assert memory_resource(client) == worker_memory(cfg.cluster) == 3 * 2**30
        futures = kind.submit(client, grid, grid.cells(), cfg=cfg, store=None)
        keys = [future.key for future in futures]
        for _ in range(100):  # until the scheduler has the graph (it comes on another comm)
            restrictions = client.run_on_scheduler(
                lambda dask_scheduler, keys=keys: {
                    key: dask_scheduler.tasks[key].resource_restrictions
                    for key in keys
                    if key in dask_scheduler.tasks
                }
            )
            if len(restrictions) == len(keys):
                break
            time.sleep(0.1)
        client.cancel(list(futures))
    large = memory.estimate("bell", 5000, grid.params["bell"], "topp", 0.9, grid.horizon + 1)
    assert 0 < large.total < 3 * 2**30
    held = {str(f.key): restrictions[f.key] for f in futures}
    small = [key for key in held if "-20-" in key]
    assert small and all(not held[key] for key in small)  # 20 states: nothing reserved
    big = [key for key in held if "-5000-" in key]
    assert big and all(held[key] == {MEMORY: large.total} for key in big)
