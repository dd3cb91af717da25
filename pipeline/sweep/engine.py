"""The sweep engine: one composed config, any kind, a Dask client, a resumable store.

``sweep(cfg, store)`` validates the config, looks its kind up, opens (or resumes) the store,
computes the cells it lacks through the client and records each as it finishes; ``run``
is the same from Python, with Hydra's compose API: the command line's overrides in, the
results ``Dataset`` out. The Dask client is made here (``pipeline.sweep.cluster``) unless
one is given, and passed down.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import xarray as xr
from distributed import Client, as_completed, performance_report

from pipeline.results import open_results
from pipeline.results.schema import Schema
from pipeline.sweep.bounds import check_bounds, check_room
from pipeline.sweep.cluster import (
    WorkerWatch,
    connect,
    dashboard_link,
    running_worker_memory,
    worker_memory,
)
from pipeline.sweep.config import check_writable, compose, validate
from pipeline.sweep.failures import CellError, Failure, Failures, describe, transient
from pipeline.sweep.kind import Grid, Sweep
from pipeline.sweep.lock import StoreLock, check_unlocked
from pipeline.sweep.logs import CELLS, to_the_log_file
from pipeline.sweep.progress import Progress, Stages, follow
from pipeline.sweep.provenance import now, provenance, public_config
from pipeline.sweep.replace import recover
from pipeline.sweep.store import ResultStore
from pipeline.sweep.taskcount import Tasks
from pipeline.sweep.timing import blas_threads

log = logging.getLogger("pipeline.sweep")

RUN_ATTRS = ("start_time", "git_commit", "host", "versions", "config")
"""What ``runs`` (the store's list of its runs) keeps of each run's provenance."""
RECOMPUTED = ("lost", "pending")
"""Statuses of a future whose result was lost with its worker and is being computed again."""


class Outcome(NamedTuple):
    """What a sweep did: its store, its kind, and the cells that failed in this run, by why."""

    store: Path
    kind: Sweep
    failed: Failures


def performance_path(store: Path) -> Path:
    """Where ``performance_report=true`` saves Dask's report: ``<store name>_performance.html``."""
    return store.parent / f"{store.stem}_performance.html"


def default_store(experiment: str) -> Path:
    """Where an experiment's results go unless ``store`` says: ``outputs/<experiment>/``."""
    return Path("outputs") / experiment / "results.zarr"


def compute(client, kind: Sweep, grid: Grid, store: ResultStore, cfg) -> Failures:
    """Compute the cells the store lacks; record each and flush every ``flush_seconds``. A
    task that raised is tried again only for a ``failures.TRANSIENT`` reason, up to
    ``retries`` times; the failed cells, by why."""
    failed = Failures()
    cells = store.todo()
    log.info("%d cells to compute, %d already done", len(cells), store.n_done)
    if not cells:
        log.info("nothing left to do: every cell of %s is done", store.path)
        store.flush()
        return failed
    with Tasks(client) as tasks:
        progress = Progress(
            grid.n_cells(), store.n_done, interval=cfg.progress_seconds, tasks=tasks
        )
        with follow(client, progress):
            futures = kind.submit(client, grid, cells, store=store.path)
            _gather(client, futures, store, progress, failed, cfg)
    return failed


def _gather(client, futures: dict, store: ResultStore, progress: Progress, failed, cfg) -> None:
    """Record every future's cells as it finishes (``compute``'s loop)."""
    watch = WorkerWatch(client, cfg.cluster.wait_for_workers)
    finished = as_completed(futures)
    attempts = dict.fromkeys(futures, 0)
    last_flush, pending = time.monotonic(), False
    try:
        while not finished.is_empty():
            batch = finished.next_batch(block=False)
            done = [future for future in batch if future.status == "finished"]
            for future, result in zip(done, client.gather(done) if done else [], strict=True):
                results = result if isinstance(result, list) else [result]
                for cell, cell_result in zip(futures.pop(future), results, strict=True):
                    if isinstance(cell_result, CellError):  # one cell of a task raised
                        _fail(store, failed, Failure(cell_result.message, rerun=False), [cell])
                        progress.advance(failed=1)
                        continue
                    store.record(cell, _values(cell_result, store.schema))
                    progress.advance(finished=1)
            for future in batch:
                if future in futures and future.status in RECOMPUTED:
                    # finished, but its result died with a worker before it was gathered:
                    # the scheduler computes it again, so wait for it again
                    finished.add(future)
                elif future in futures and transient(future) and attempts[future] < cfg.retries:
                    attempts[future] += 1
                    client.retry([future])
                    finished.add(future)
                elif future in futures:  # not finished, and trying again would not help
                    cells_of = futures.pop(future)
                    _fail(store, failed, describe(client, future), cells_of)
                    progress.advance(failed=len(cells_of))
            pending = pending or bool(batch)
            if pending and time.monotonic() - last_flush >= cfg.flush_seconds:
                store.flush()
                last_flush, pending = time.monotonic(), False
            if not batch:
                watch()
                progress.tick()
                time.sleep(0.02)
    finally:
        try:
            store.flush()
        finally:
            progress.close()


def _values(record, schema: Schema) -> dict[str, object]:
    """What a cell's task returned, its kind's ``Record``, as the store records it; a
    ``TypeError`` for anything else (a kind's error, not the user's)."""
    if not isinstance(record, schema.record):
        raise TypeError(
            f"a cell of the {schema.name} kind returned a {type(record).__name__}; its tasks "
            f"return a {schema.record.__name__} (pipeline.results.schema.Record)"
        )
    return record.values()


def _fail(store: ResultStore, failed: Failures, failure: Failure, cells: list) -> None:
    """Record that ``cells`` failed, and why: in the store, the failures, the log file."""
    failed.add(failure, cells)
    for cell in cells:
        store.record_failure(cell, failure.message)
        CELLS.warning("cell %s failed: %s", cell, failure.message)


def prepare(cfg, store: Path, *, own_cluster: bool = True) -> tuple[Sweep, Grid]:
    """The kind and grid of a composed config within its bounds, whose models are valid, whose
    cells fit the workers of the cluster it starts (``own_cluster``) and whose store can be
    written; ``ConfigError`` (one line) for a bad value, a grid or store too large
    (``bounds``), a cell too large, a model the workers could not read, or a store path it
    cannot use, in that order. Reads, never writes. Says what it is doing when that takes
    a while (``progress.Stages``)."""
    stage = Stages()
    try:
        stage("checking the config")
        kind = validate(cfg)
        grid = kind.grid(cfg)
        check_bounds(kind.SCHEMA, grid, max_cells=cfg.max_cells)
        if own_cluster:
            stage(f"estimating the memory of {grid.n_cells():,} cells")
            _check_memory(kind, grid, worker_memory(cfg.cluster))
        stage("checking what the cells will read (a model's files)")
        kind.verify(grid)
        stage(f"checking the store {store}")
        check_writable(store)
        check_room(kind.SCHEMA, grid, store)
        check_unlocked(store)
        ResultStore.check(store, kind.SCHEMA, grid, overwrite=cfg.overwrite)
    finally:
        stage.close()
    return kind, grid


def _check_memory(kind: Sweep, grid: Grid, limit: int | None) -> None:
    """The kind's ``check_memory`` refuses a grid with a cell that cannot fit a worker's
    ``limit``; nothing to check while the limit is not known (None)."""
    if limit:
        kind.check_memory(grid, limit)


def sweep(cfg, store: Path, *, client: Client | None = None) -> Outcome:
    """Run the sweep of a composed config into ``store``; the finished cells stay stored
    whatever happens. ``client`` None starts (and stops) the configured cluster; a given
    client is used as it is and left open. Raises ``ConfigError`` for a bad config or a
    store that cannot be used (another sweep holds its lock), before any cluster starts."""
    store = Path(store)
    kind, grid = prepare(cfg, store, own_cluster=client is None)
    with StoreLock(store) as lock, to_the_log_file() as log_file:
        return _locked(cfg, store, kind, grid, client, lock, log_file)


def _locked(
    cfg,
    store: Path,
    kind: Sweep,
    grid: Grid,
    client: Client | None,
    lock: StoreLock,
    log_file: Path | None,
) -> Outcome:
    """``sweep`` with the store's lock held (and its folder, once the store exists)."""
    recover(store, locked=True)  # what a killed replacement left, before any cluster starts
    ResultStore.check(store, kind.SCHEMA, grid, overwrite=cfg.overwrite)  # as it is now
    known = client is None and worker_memory(cfg.cluster) is not None
    started = (
        connect(cfg.cluster, allowed_failures=cfg.retries, log_file=log_file)
        if client is None
        else contextlib.nullcontext(client)
    )
    with started as client:
        if not known:  # the workers' memory was not known before they ran
            _check_memory(kind, grid, running_worker_memory(client))
        assert client.scheduler is not None, "a connected client has its scheduler"
        log.info("Dask scheduler: %s", client.scheduler.address)
        log.info("Dask dashboard: %s", dashboard_link(client, cfg.cluster))
        attrs = {"config": public_config(cfg), "start_time": now(), **provenance()}
        results = ResultStore.open(store, kind.SCHEMA, grid, attrs, overwrite=cfg.overwrite)
        lock.hold_store()
        threads = client.run(blas_threads)
        low, high = min(threads.values()), max(threads.values())
        workers = {
            "workers": len(threads),
            "worker_blas_threads": str(low) if low == high else f"{low} to {high}",
            **grid.run_attrs(),
        }
        results.update_attrs(**workers)
        results.add_run({**{k: attrs[k] for k in RUN_ATTRS}, **workers})
        report = (
            performance_report(filename=str(performance_path(store)))
            if cfg.performance_report
            else contextlib.nullcontext()
        )
        with report:
            failed = compute(client, kind, grid, results, cfg)
        results.update_attrs(end_time=now())
    return Outcome(store, kind, failed)


def run(overrides: Sequence[str] = (), *, client: Client | None = None) -> xr.Dataset:
    """The sweep of ``python -m pipeline.sweep <overrides>``, from Python; its results.

    The same config composition and validation as the command line (Hydra's compose API
    over ``conf/``), the same store (``store=``, default ``outputs/<experiment>/``), the
    same resume. ``client`` None starts the configured cluster and stops it at the end; a
    given ``distributed.Client`` is used as it is and left open. Returns the store opened
    lazily (``pipeline.open_results``); failed cells are marked in its ``failed`` and
    ``error`` variables (and logged). Raises ``ConfigError`` (one line) for bad overrides.

    >>> from pipeline.sweep import run
    >>> ds = run(["experiment=smoke", "grid.families=[bell]"])  # doctest: +SKIP
    >>> float(ds.tv.sel(mode="predict").isel(t=-1).max())  # doctest: +SKIP
    """
    cfg, experiment = compose(list(overrides))
    outcome = sweep(cfg, Path(cfg.store) if cfg.store else default_store(experiment), client=client)
    for line in outcome.failed.lines():
        log.warning(line)
    return open_results(outcome.store)
