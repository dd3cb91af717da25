"""The sweep's entry point (``python -m pipeline.sweep``): config to client to store.

This module makes the Dask client and passes it down. Running the same command
again resumes: only cells not yet done are computed.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
import time
from pathlib import Path

import hydra
from distributed import as_completed
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from hydra.types import RunMode
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from pipeline import open_results
from pipeline.analysis import summary_table
from pipeline.sweep import coupled, plan, tasks, training
from pipeline.sweep.cluster import NoWorkers, WorkerWatch, connect, dashboard_link
from pipeline.sweep.config import REPOSITORY, ConfigError, check_writable, register, validate
from pipeline.sweep.coupled import CoupledGrid
from pipeline.sweep.coupled_store import CoupledStore
from pipeline.sweep.grid import Grid
from pipeline.sweep.progress import Progress
from pipeline.sweep.provenance import now, provenance, public_config
from pipeline.sweep.store import ResultStore
from pipeline.sweep.training import TrainingGrid, TrainingStore

VERSION_BASE = "1.3"
CONFIG_DIR = REPOSITORY / "conf"
log = logging.getLogger("pipeline.sweep")


def store_path(cfg) -> Path:
    """``store`` if set; else ``outputs/<experiment>/results.zarr`` (a multirun job's own dir)."""
    if cfg.store:
        return Path(cfg.store)
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        return Path(hydra_cfg.runtime.output_dir) / "results.zarr"
    return Path("outputs") / hydra_cfg.runtime.choices["experiment"] / "results.zarr"


RECOMPUTED = ("lost", "pending")
"""Statuses of a future whose result was lost with its worker and is being computed again."""


def _message(error: BaseException) -> str:
    first = str(error).strip().splitlines()
    return f"{type(error).__name__}: {first[0] if first else ''}"[:500]


def _failure(future) -> str:
    """One line on why a future did not finish."""
    if future.status == "error":
        return _message(future.exception())
    return f"the task was {future.status}"


def plan_settings(grid: Grid, cfg) -> plan.Settings:
    """What every model's plan shares, from the grid and the config."""
    timing = cfg.timing
    return plan.Settings(
        horizon=grid.horizon,
        observe_every=grid.observe_every,
        timing=tasks.Timing(
            repeats=timing.repeats,
            min_seconds=timing.min_seconds,
            max_repeats=timing.max_repeats,
            threads=timing.blas_threads,
        ),
        gamma_exact_max_states=cfg.gamma_exact_max_states,
        exact_max_states=cfg.exact_max_states,
    )


def compute(client, grid: Grid | TrainingGrid | CoupledGrid, store: ResultStore, cfg) -> None:
    """Compute the cells the store lacks; record each and flush every ``flush_seconds``."""
    cells = store.todo()
    progress = Progress(len(grid.cells()), store.n_done, interval=cfg.progress_seconds)
    if isinstance(grid, TrainingGrid):
        models = store.path.parent.resolve() / f"{store.path.stem}_models"
        futures = training.submit(client, grid, cells, retries=cfg.retries, models=models)
    elif isinstance(grid, CoupledGrid):
        futures = coupled.submit(client, grid, cells, retries=cfg.retries)
    else:
        futures = plan.submit(
            client,
            grid,
            cells,
            settings=plan_settings(grid, cfg),
            retries=cfg.retries,
            fuse_states=cfg.fuse_states,
        )
    log.info("%d cells to compute, %d already done", len(cells), store.n_done)
    watch = WorkerWatch(client, cfg.cluster.wait_for_workers)
    finished = as_completed(futures)
    last_flush, pending = time.monotonic(), False
    try:
        while not finished.is_empty():
            batch = finished.next_batch(block=False)
            done = [future for future in batch if future.status == "finished"]
            for future, result in zip(done, client.gather(done) if done else [], strict=True):
                results = result if isinstance(result, list) else [result]
                for cell, cell_result in zip(futures.pop(future), results, strict=True):
                    store.record(cell, cell_result.values())
                progress.advance(finished=len(results))
            for future in batch:
                if future in futures and future.status in RECOMPUTED:
                    # finished, but its result died with a worker before it was gathered:
                    # the scheduler computes it again, so wait for it again
                    finished.add(future)
                elif future in futures:  # not finished: failed after its retries
                    message = _failure(future)
                    for cell in futures.pop(future):
                        store.record_failure(cell, message)
                        log.warning("cell %s failed: %s", cell, message)
                        progress.advance(failed=1)
            pending = pending or bool(batch)
            if pending and time.monotonic() - last_flush >= cfg.flush_seconds:
                store.flush()
                last_flush, pending = time.monotonic(), False
            if not batch:
                watch()
                time.sleep(0.02)
    finally:
        store.flush()
        progress.close()


def run(cfg) -> int:
    """The sweep of a composed config; returns the exit status (1 if any cell failed)."""
    validate(cfg)
    if cfg.training is not None:
        grid, kind, summary = TrainingGrid.from_config(cfg), TrainingStore, training.summary
    elif cfg.coupled is not None:
        grid, kind, summary = CoupledGrid.from_config(cfg), CoupledStore, coupled.summary
    else:
        grid, kind, summary = Grid.from_config(cfg), ResultStore, summary_table
    path = store_path(cfg)
    check_writable(path)
    kind.check(path, grid, overwrite=cfg.overwrite)
    with connect(cfg.cluster) as client:
        log.info("Dask scheduler: %s", client.scheduler.address)
        log.info("Dask dashboard: %s", dashboard_link(client, cfg.cluster))
        attrs = {
            "config": public_config(cfg),
            "start_time": now(),
            **provenance(),
        }
        store = kind.open(path, grid, attrs, overwrite=cfg.overwrite)
        threads = client.run(tasks.blas_threads)
        low, high = min(threads.values()), max(threads.values())
        store.update_attrs(
            workers=len(threads),
            worker_blas_threads=str(low) if low == high else f"{low} to {high}",
            timing_blas_threads=cfg.timing.blas_threads,
        )
        compute(client, grid, store, cfg)
        store.update_attrs(end_time=now())
    results = open_results(path)
    print(summary(results))
    print(f"results: {path}  (xr.open_zarr({str(path)!r}))")
    if store.n_failed:
        print(
            f"{store.n_failed} cells failed; see the `error` variable. Run the same "
            "command again to retry them.",
            file=sys.stderr,
        )
    return 1 if store.n_failed else 0


@hydra.main(version_base=VERSION_BASE, config_path=str(CONFIG_DIR), config_name="config")
def _hydra_main(cfg) -> None:
    try:
        status = run(cfg)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except NoWorkers as error:
        print(
            f"error: {error}; finished cells are stored: run the same command to resume",
            file=sys.stderr,
        )
        sys.exit(1)
    if status:
        sys.exit(status)


def _allowed_keys(error: OmegaConfBaseException) -> str:
    """The keys the schema allows where ``error`` found an unknown one."""
    schema = getattr(error, "object_type", None)
    if dataclasses.is_dataclass(schema):
        return "; allowed: " + ", ".join(f.name for f in dataclasses.fields(schema))
    return ""


def _composition_error(error: Exception) -> str:
    """A one-line description of why Hydra could not compose the overrides.

    What is allowed comes from Hydra and OmegaConf themselves: the options of
    a config group from Hydra's config repository, the keys from the schema.
    """
    if isinstance(error, OverrideParseException):
        return f"cannot parse the override {error.override!r}: {str(error).splitlines()[0]}"
    if isinstance(error, MissingConfigException) and error.missing_cfg_file and error.options:
        group, _, option = error.missing_cfg_file.rpartition("/")
        return f"{group}={option}: no such {group}; allowed: {', '.join(error.options)}"
    cause = error.__cause__
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None) or "config"
        detail = str(cause).strip().splitlines()[0]
        unknown = isinstance(cause, ConfigKeyError | ConfigAttributeError)
        return f"{key}: {detail}{_allowed_keys(cause) if unknown else ''}"
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return f"the overrides do not compose ({type(error).__name__})"
    return " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def _check_overrides(overrides: list[str]) -> str | None:
    """Compose the config once to report a bad override in one line; None if it composes.

    Hydra's flags (``-m``, ``--cfg``, ``--help``...) and sweep syntax are left to Hydra.
    """
    if any(o.startswith("-") for o in overrides):
        return None
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=VERSION_BASE):
            compose("config", overrides=overrides, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException, ValueError) as error:
        return _composition_error(error)
    return None


REPLACED = ("grid.n_states", "grid.methods", "coupled.n_states")
"""Keys whose override replaces the experiment's value instead of merging into it."""


def replaceable(overrides: list[str]) -> list[str]:
    """Overrides as Hydra takes them: mappings that replace, and ``grid.p`` as shorthand.

    Hydra merges an override into the node it replaces: ``grid.methods={topk: [5]}``
    would add top-k to the experiment's methods, and OmegaConf cannot merge a
    mapping into a list (``grid.n_states``). Setting the node to null first
    replaces it. ``grid.p=[...]`` replaces the experiment's methods by top-p
    alone; given with ``grid.methods`` it is an error (``config.grid_methods``).
    """
    keys = {override.partition("=")[0] for override in overrides}
    out = []
    for override in overrides:
        key, _, value = override.partition("=")
        if value != "null" and key == "grid.p" and "grid.methods" not in keys:
            out.append("grid.methods=null")
        elif value != "null" and key in REPLACED:
            out.append(f"{key}=null")
        out.append(override)
    return out


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Entry point: register configs, report bad overrides in one line, run under Hydra."""
    try:
        register()
        sys.argv[1:] = replaceable(sys.argv[1:])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    problem = _check_overrides(sys.argv[1:])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    signal.signal(signal.SIGTERM, _stop)
    try:
        _hydra_main()
    except KeyboardInterrupt:
        print(
            "\ninterrupted: finished cells are stored; run the same command to resume",
            file=sys.stderr,
        )
        sys.exit(130)


if __name__ == "__main__":
    main()
