"""A cell's memory, estimated before anything runs, against what its model and approximation
really take."""

import itertools
import math
import tempfile
import time
import tracemalloc

import numpy as np
import pytest

from pipeline.inference import decoder
from pipeline.kinds.methods import memory, plan, spilled, tasks
from pipeline.kinds.methods.grid import Cell
from pipeline.kinds.methods.modes import base, decode, lookup, smooth
from pipeline.kinds.methods.sweep import check_memory, plan_settings, reservations
from pipeline.methods import approximate
from pipeline.models import build_model
from pipeline.sweep.cluster import MEMORY, connect, memory_resource, worker_memory
from pipeline.sweep.config import ConfigError, validate

from sweeping import composed


@pytest.mark.parametrize(
    ("family", "params", "method", "setting", "n"),
    [
        ("bell", {"structured": True}, "topp", 0.9, 8192),  # peaks on a background: grows as n
        ("dirichlet", {}, "topk", 5, 5000),  # dense rows: grows as n^2 (5000 states: 200 MB)
        ("peaked", {"structured": True}, "topp", 0.5, 8192),
    ],
)
def test_the_estimate_extrapolates_what_a_larger_model_takes(family, params, method, setting, n):
    found = memory.estimate(family, n, params, method, setting, steps=51, mode="filter")
    hmm = build_model(family, n, **params)
    model = memory._model_bytes(hmm)
    approximation = memory._model_bytes(approximate(hmm, method, setting).hmm)
    assert found.model == pytest.approx(model, rel=0.1)
    assert found.approximation == pytest.approx(approximation, rel=0.1)
    assert found.total > model + approximation


@pytest.mark.parametrize("mode", ["smooth", "decode"])
@pytest.mark.parametrize("whole", [True, False])
def test_what_a_smoothing_or_viterbi_run_holds_is_what_the_estimate_counts(
    monkeypatch, mode, whole
):
    """One run of a sequence mode, its posteriors or back-pointers whole or in segments from
    checkpoints: its peak allocation (tracemalloc) is within what ``run_bytes`` and
    ``likelihood_bytes`` count, and at least half of it (an estimate, not a guess)."""
    n, steps = 20_000, 51
    hmm = build_model("bell", n, seed=0, structured=True)
    if not whole:  # 4 steps of beliefs, 4 of back-pointers: segments of 8 steps
        monkeypatch.setattr(base, "HISTORY_BYTES", 8 * n * 4)
        monkeypatch.setattr(decoder, "POINTER_BYTES", 2 * n * 4)
        monkeypatch.setattr(decode, "POINTER_BYTES", 2 * n * 4)
    _, observed = tasks.observations(hmm, mode=mode, horizon=steps - 1, observe_every=2, seed=0)
    lookup(mode).run(hmm, observed, 1.0)  # compiled before measuring
    tracemalloc.start()
    lookup(mode).run(hmm, observed, 1.0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    counted = memory.run_bytes(mode, steps, n) + memory.likelihood_bytes(mode, steps, n)
    segment = smooth.segment_steps(steps, n) if mode == "smooth" else decode.MODE.segment(steps, n)
    assert segment == (steps if whole else 8)
    assert 0.5 * counted <= peak <= counted, (peak, counted)


def test_small_cells_and_fixed_size_families_are_not_estimated(tmp_path):
    assert memory.estimate("bell", 4096, {}, "topp", 0.9, steps=51, mode="predict") is None
    assert memory.estimate("weather", 6, {}, "topp", 0.9, steps=51, mode="predict") is None


THREE_GIB = ["cluster.n_workers=1", "cluster.memory_limit=3GiB", "cluster.dashboard_address=:0"]
"""A cluster of one worker declared 3 GiB."""


@pytest.fixture(scope="module")
def three_gib():
    """The client of a ``THREE_GIB`` cluster started as a sweep starts it (``connect``)."""
    with connect(composed(*THREE_GIB).cluster) as client:
        yield client


def test_a_large_models_tasks_reserve_what_they_hold_beyond_the_model(three_gib):
    """Every task of a model too large to fuse reserves what it holds beyond the model and
    its approximations (``memory.ModelTasks``), scaled by the worker's memory over what the
    model leaves of it (at most the model's largest estimate): two tasks run side by side
    exactly where what they hold fits beside the model. A fused model's task reserves
    nothing."""
    client = three_gib
    cfg = composed(
        *THREE_GIB,
        "grid.families=[bell]",
        "grid.n_states=[20,5000]",
        "grid.methods={topp:[0.9]}",
        "grid.modes=[predict,filter]",
        "grid.seeds=[0]",
    )
    kind = validate(cfg)
    grid = kind.grid(cfg)
    budget = 3 * 2**30
    assert memory_resource(client) == worker_memory(cfg.cluster) == budget
    futures = kind.submit(client, grid, grid.cells(), store=None)
    keys = {str(future.key) for future in futures}
    restrictions = {}
    for _ in range(100):  # until the scheduler has the graph (it comes on another comm)
        restrictions = client.run_on_scheduler(
            lambda dask_scheduler: {
                str(key): task.resource_restrictions for key, task in dask_scheduler.tasks.items()
            }
        )
        if keys <= set(restrictions):
            break
        time.sleep(0.1)
    client.cancel(list(futures))
    held = memory.model_tasks(
        "bell",
        5000,
        grid.params["bell"],
        [("topp", 0.9, m) for m in ("predict", "filter")],
        grid.horizon + 1,
    )
    free = budget - held.resident
    assert 0 < held.resident < budget and 0 < free
    largest = max(  # the model's largest estimate, as the sweep checks it before it starts
        memory.timing_estimate(
            "bell", 5000, grid.params["bell"], [("topp", 0.9)], grid.horizon + 1,
            modes=("predict", "filter"),
        ),
        *(
            memory.estimate(
                "bell", 5000, grid.params["bell"], "topp", 0.9, grid.horizon + 1, mode=mode
            ).total
            for mode in ("predict", "filter")
        ),
    )  # fmt: skip

    def share(size: int) -> int:
        return min(budget, math.ceil(size * budget / free), largest)

    small = [key for key in restrictions if "-20-" in key]
    assert small and all(not restrictions[key] for key in small)  # 20 states: fused, nothing

    def size(key: str) -> int:
        """What the task ``key`` holds beyond the model, by its name."""
        mode = "filter" if "-filter-" in key else "predict"
        kind = key.split("-")[0]
        if kind in ("exact", "timing"):
            return held.run[mode]
        return {
            "model": held.model,
            "gamma": max(held.run.values()),
            "approximate": held.approximation["topp", 0.9],
            "cell": held.cell["topp", 0.9, mode],
        }[kind]

    big = {key: r for key, r in restrictions.items() if "-5000-" in key}
    kinds = {key.split("-")[0] for key in big}
    assert kinds == {"model", "gamma", "approximate", "exact", "timing", "cell"}
    sizes = {key: size(key) for key in big}
    for key, reserved in big.items():
        assert reserved == {MEMORY: share(sizes[key])}, key
    for one, other in itertools.combinations_with_replacement(big, 2):
        fits = sizes[one] + sizes[other] <= free
        assert (big[one][MEMORY] + big[other][MEMORY] <= budget) == fits, (one, other)
    # one model: where it leaves room, its scaled shares are below its largest estimate
    assert all(r[MEMORY] < largest for key, r in big.items() if not key.startswith("model-"))


def test_models_too_large_to_be_held_side_by_side_run_one_after_the_other(three_gib):
    """Where two models' holdings pass the cluster's memory, the second model's build waits
    for every cell of the first (through one task that depends on them all, in the graph the
    scheduler has); models that
    fit together do not wait. Every cell's values are those of the same grid
    computed without waiting."""
    client = three_gib
    cfg = composed(
        *THREE_GIB,
        "methods.grid.families=[dirichlet]",
        "methods.grid.n_states=[40,50]",
        "methods.grid.methods={topp:[0.9]}",
        "methods.grid.modes=[predict,filter]",
        "methods.grid.seeds=[0]",
        "methods.grid.horizon=6",
        "methods.fuse_states=0",
        "methods.timing.enabled=false",
    )
    kind = validate(cfg)
    grid = kind.grid(cfg)
    cells = grid.cells()
    settings = plan_settings(grid)

    def submitted(memory):
        futures = plan.submit(
            client, grid, cells, settings=settings, fuse_states=0,
            held=lambda spec, cells: 2 * 2**30, memory=memory,
        )  # fmt: skip
        models = {}
        for _ in range(100):  # until the scheduler has the graph
            models = client.run_on_scheduler(
                lambda dask_scheduler: {
                    str(key): sorted(
                        (str(d.key), sorted(str(e.key) for e in d.dependencies))
                        for d in task.dependencies
                    )
                    for key, task in dask_scheduler.tasks.items()
                    if str(key).startswith("model-")
                }
            )
            if len(models) == 2:
                break
            time.sleep(0.1)
        results = {cell: future.result(timeout=60) for future, (cell,) in futures.items()}
        return models, results

    waiting, gated = submitted(3 * 2**30)
    first = {k: v for k, v in waiting.items() if "-40-" in k}
    second = {k: v for k, v in waiting.items() if "-50-" in k}
    assert list(first.values()) == [[]]
    [[(done, waited)]] = second.values()  # one task, done once the first model's cells are
    assert done.startswith("cells-done-")
    assert len(waited) == 2 and all(key.startswith("cell-dirichlet-40-") for key in waited)
    client.cancel(list(client.futures))
    for _ in range(100):  # until the scheduler has forgotten them
        if not client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
            break
        time.sleep(0.1)
    free, ungated = submitted(None)
    assert all(not dependencies for dependencies in free.values())
    for cell, record in gated.items():
        for name in VALUES:
            np.testing.assert_array_equal(getattr(record, name), getattr(ungated[cell], name))


VALUES = ("tv", "certificate", "eps", "sparsity", "log_evidence")
"""Value variables of a methods cell, compared between two ways of scheduling it."""


class Held:
    """A task result distributed cannot size (as a model is): it counts only the wrapper."""

    def __init__(self, size: int):
        self.values = np.ones(size // 8)


def hold_and_grow(held: Held, size: int) -> float:
    """Hold ``held`` while taking ``size`` more bytes, long enough for the memory monitor."""
    more = np.ones(size // 8)
    time.sleep(2)
    return float(held.values[0] + more[0])


def test_a_started_clusters_workers_keep_results_past_the_spill_threshold(three_gib):
    """distributed spills results to disk from 70% of a worker's memory: a model its running
    task holds would be pickled for nothing and read back as a second copy. 1.5 GB held and
    0.9 GB taken pass 70% of 3 GiB (measured: spilled with distributed's defaults)."""
    client = three_gib
    held = client.submit(Held, 1_500_000_000, key="held")
    assert client.submit(hold_and_grow, held, 900_000_000).result(timeout=60) == 2.0
    on_disk = client.run(lambda dask_worker: list(getattr(dask_worker.data, "slow", {})))
    del held
    # what the sweep itself puts on a worker's disk (an exact history too large for memory)
    # goes to the worker's own directory, removed with the worker
    directory = client.submit(spilled._local_directory).result(timeout=30)
    own = client.run(lambda dask_worker: dask_worker.local_directory)
    assert list(on_disk.values()) == [[]]
    assert list(own.values()) == [directory] and directory != tempfile.gettempdir()


def test_a_timing_task_holds_the_model_and_every_approximation_it_times():
    """The timing task's estimate counts the exact model and each approximation as they
    really are (8192 states, extrapolated from 1024 and 2048), plus one run; a grid whose
    every cell fits a worker but whose timing task does not (short runs: the approximations
    weigh most) is refused, naming it."""
    n, steps, variants = 8192, 6, [("topp", 0.5), ("topp", 0.9), ("topk", 5)]
    params = {"structured": True}
    hmm = build_model("bell", n, **params)
    held = memory._model_bytes(hmm) + sum(
        memory._model_bytes(approximate(hmm, m, s).hmm) for m, s in variants
    )
    timing = memory.timing_estimate("bell", n, params, variants, steps, modes=("filter",))
    one_run = memory.run_bytes("filter", steps, n) + memory.likelihood_bytes("filter", steps, n)
    assert timing - memory.WORKER_BYTES - one_run == pytest.approx(held, rel=0.1)
    cfg = composed(
        "grid.families=[bell]",
        f"grid.n_states=[{n}]",
        "model.bell.structured=true",
        "grid.methods={topp:[0.5,0.9],topk:[5]}",
        "grid.modes=[filter]",
        f"grid.horizon={steps - 1}",
    )
    grid = validate(cfg).grid(cfg)
    cells = max(
        memory.estimate("bell", n, params, m, s, steps, mode="filter").total for m, s in variants
    )
    assert cells < timing
    with pytest.raises(
        ConfigError,
        match=rf"^methods.grid.methods: the timing task of family=bell, n_states={n} \(its exact "
        "model and its 3 approximations side by side",
    ):
        check_memory(grid, (cells + timing) // 2)
    check_memory(grid, timing)  # fits


def test_a_group_holding_more_than_a_worker_reserves_each_models_largest_estimate():
    """Where a group of models spread over the workers holds more than one worker's memory,
    each task reserves its model's largest estimate (its timing task's or a cell's), as
    before per-task reservations, not the whole worker."""
    gib = 2**30
    held = memory.ModelTasks(
        resident=memory.WORKER_BYTES + 2 * gib + gib,
        model=2 * gib,
        approximation={("topp", 0.9): gib},
        run={"filter": gib // 4},
        cell={("topp", 0.9, "filter"): gib // 2},
    )
    cell = Cell("bell", 5000, "topp", 0.9, 0, "filter")
    timing = held.resident + gib // 4
    largest = max(timing, memory.WORKER_BYTES + 2 * gib + gib + gib // 2)  # the cell's
    found = reservations(held, [cell], budget=8 * gib, resident=20 * gib)
    assert found.cell[cell] == found.run["filter"] == found.model == {MEMORY: largest}
    room = reservations(held, [cell], budget=8 * gib, resident=held.resident)
    free = 8 * gib - held.resident
    assert room.cell[cell] == {MEMORY: math.ceil(gib // 2 * 8 * gib / free)}
