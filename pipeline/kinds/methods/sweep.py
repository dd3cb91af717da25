"""The methods sweep (the default kind): approximation methods against exact inference.

Its settings are the ``methods`` section. ``methods.grid`` (``config.GridConfig``) names
model families and their sizes, methods and their settings, seeds, modes and the horizon;
every cell runs one approximation against its exact reference and stores what ``results``
lists. ``config`` types the keys, ``grid`` holds the cells, ``plan`` the shared work as Dask
tasks, ``tasks`` (and ``timed``, ``modes``) what the workers run, ``records`` what they hand
each other, ``memory`` what a cell needs. This module, the kind's
``pipeline.sweep.kind.SweepKind``, checks the keys, estimates the memory, and submits the
cells.
"""

from __future__ import annotations

import itertools
import math
import typing
from pathlib import Path

from distributed import Client, Future
from distributed.system import MEMORY_LIMIT

from pipeline.kinds.methods import memory, modes, plan, results
from pipeline.kinds.methods.config import MethodsConfig
from pipeline.kinds.methods.grid import (
    Cell,
    MethodsGrid,
    family_sizes,
    grid,
    grid_methods,
    model_parameters,
)
from pipeline.methods import METHODS, PluginError
from pipeline.models import FAMILIES, ParameterError, check_model, verify_model
from pipeline.sweep.cluster import MEMORY, memory_resource
from pipeline.sweep.config import check_list
from pipeline.sweep.config.errors import ConfigError

SCHEMA = results.SCHEMA
SECTION = "methods"
CONFIG = MethodsConfig
summary = results.summary

__all__ = [
    "CONFIG",
    "SCHEMA",
    "SECTION",
    "check_memory",
    "grid",
    "submit",
    "summary",
    "validate",
    "verify",
]


def _validate_methods(grid) -> None:
    key = "methods.grid.methods"
    for method, settings in grid_methods(grid).items():
        try:
            module = METHODS.lookup(method)
        except PluginError as error:
            raise ConfigError(key, str(error)) from None
        except ValueError:
            raise ConfigError(
                key, f"unknown method {method!r}; allowed: {', '.join(METHODS)}"
            ) from None
        where = f"methods.grid.methods.{method}"
        if not isinstance(settings, typing.Sequence) or isinstance(settings, str):
            raise ConfigError(where, f"{settings!r} is not allowed; allowed: a list of settings")
        check_list(where, settings, (int, float), "numbers")
        for setting in settings:
            try:
                module.check(setting)
            except (TypeError, ValueError) as error:
                raise ConfigError(where, str(error)) from None


def _validate_families(grid, model) -> dict[str, list[int]]:
    """Every family of ``grid`` known and usable, its parameters (of ``model``) and sizes
    valid; the sizes."""
    check_list("methods.grid.families", grid.families, str, ", ".join(FAMILIES.names()))
    for family in grid.families:
        try:
            FAMILIES.lookup(family)
        except PluginError as error:
            raise ConfigError("methods.grid.families", str(error)) from None
        except ValueError:
            raise ConfigError(
                "methods.grid.families",
                f"unknown family {family!r}; allowed: {', '.join(FAMILIES.names())}",
            ) from None
    params = model_parameters(model, grid.families)
    sizes = family_sizes(grid, params)
    mapping = isinstance(grid.n_states, typing.Mapping)
    for family, family_size in sizes.items():
        key = (
            f"methods.grid.n_states.{family}"
            if mapping and family in grid.n_states
            else "methods.grid.n_states"
        )
        check_list(key, family_size, int, "integers >= 2")
        for n in family_size:
            try:
                check_model(family, n, **params[family])
            except ParameterError as error:
                at = (
                    key
                    if error.parameter == "n_states"
                    else f"methods.model.{family}.{error.parameter}"
                )
                raise ConfigError(at, str(error)) from None
            except ValueError as error:  # a plug-in's check may name no parameter
                raise ConfigError(f"methods.model.{family}", str(error)) from None
    return sizes


def validate(cfg) -> None:
    """Raise ``ConfigError`` naming the first invalid key of ``methods.grid`` (and
    ``methods.model``)."""
    section = cfg.methods
    grid = section.grid
    _validate_families(grid, section.model)
    _validate_methods(grid)
    check_list("methods.grid.seeds", grid.seeds, int, "integers >= 0")
    check_list("methods.grid.modes", grid.modes, str, modes.allowed())
    for mode in grid.modes:
        try:
            modes.lookup(mode)
        except ValueError as error:  # a PluginError too
            raise ConfigError("methods.grid.modes", str(error)) from None


def verify(grid: MethodsGrid) -> None:
    """Raise ``ConfigError`` naming the key at fault unless every model of the grid is valid,
    read as the workers will read it (``pipeline.models.verify_model``: a model file in
    full, every other family by its cheap check): once, before any cluster starts."""
    for family in grid.families:
        for n in grid.sizes[family]:
            try:
                verify_model(family, n, **grid.params[family])
            except ParameterError as error:
                at = (
                    "methods.grid.n_states"
                    if error.parameter == "n_states"
                    else f"methods.model.{family}.{error.parameter}"
                )
                raise ConfigError(at, str(error)) from None
            except ValueError as error:  # a plug-in's verify may name no parameter
                raise ConfigError(f"methods.model.{family}", str(error)) from None


def check_memory(grid: MethodsGrid, limit: int) -> None:
    """Raise ``ConfigError`` naming the largest cell whose estimated memory
    (``memory.estimate``) passes ``limit``, a worker's, and what to do; or the timing task
    of a model that does (``memory.timing_estimate``: its exact model and every
    approximation side by side)."""
    variants = [(m, s) for m in grid.methods for s in grid.settings[m]]
    worst = None
    for family in grid.families:
        for n in grid.sizes[family]:
            for (method, setting), mode in itertools.product(variants, grid.modes):
                found = memory.estimate(
                    family, n, grid.params[family], method, setting, grid.horizon + 1, mode=mode
                )
                if found and (worst is None or found.total > worst[0].total):
                    worst = (found, family, n, method, setting)
    if worst is not None and worst[0].total > limit:
        found, family, n, method, setting = worst
        raise ConfigError(
            "methods.grid.n_states",
            f"the cell family={family}, n_states={n}, method={method}, setting={setting:g} "
            f"needs about {_gib(found.total)} GiB (model {_gib(found.model)}, approximation "
            f"{_gib(found.approximation)}, beliefs {_gib(found.beliefs)}, the worker itself "
            f"{_gib(memory.WORKER_BYTES)}), more than a worker's {limit / 2**30:.2f} GiB; "
            f"allowed: cells that fit a worker: {_bigger(limit, found.total)}use a cluster "
            "entry with more memory per worker, or fewer states",
        )
    for family in grid.families:
        for n in grid.sizes[family]:
            timing = memory.timing_estimate(
                family, n, grid.params[family], variants, grid.horizon + 1, modes=grid.modes
            )
            if timing > limit:
                raise ConfigError(
                    "methods.grid.methods",
                    f"the timing task of family={family}, n_states={n} (its exact model and "
                    f"its {len(variants)} approximations side by side) needs about "
                    f"{_gib(timing)} GiB, more than a worker's {limit / 2**30:.2f} GiB; "
                    f"allowed: {_bigger(limit, timing)}a cluster entry with more memory per "
                    "worker, or fewer methods and settings in one sweep",
                )


def _bigger(limit: int, needed: float) -> str:
    """The advice to use this machine's whole memory, where that is enough."""
    machine = MEMORY_LIMIT
    if limit < needed <= machine:
        return f"give one worker this machine's {machine / 2**30:.1f} GiB (cluster=machine), "
    return ""


def _gib(size: float) -> str:
    """``size`` bytes in GiB, as a person reads them: 0.4, 12.3, 1,157."""
    gib = size / 2**30
    return f"{gib:,.0f}" if gib >= 100 else f"{gib:.1f}"


def plan_settings(grid: MethodsGrid) -> plan.Settings:
    """What every model's plan shares, from the grid."""
    return plan.Settings(
        horizon=grid.horizon,
        observe_every=grid.observe_every,
        timing=grid.timing,
        gamma_exact_max_states=grid.gamma_exact_max_states,
        exact_max_states=grid.exact_max_states,
    )


def submit(
    client: Client, grid: MethodsGrid, cells: list[Cell], *, store: Path
) -> dict[Future, list[Cell]]:
    """Every model's plan (``plan.submit``): a future's result is one cell's, or a fused
    model's list of them. Where the workers declare their memory (``cluster.MEMORY``: the
    clusters the sweep starts), models go in groups whose holdings (``memory.ModelTasks``'
    ``resident``: the model and every approximation its cells need) fit the workers' memory
    together, one group after the other: two models' tasks side by side ran a 24 GiB worker
    out of memory at 10^7 states when only their approximations and beliefs were reserved.
    Within a group every task reserves what it holds beyond the group (``reservations``),
    scaled so that tasks reserve a worker's whole memory exactly when what they hold fills
    what the group leaves of it: the tasks running side by side on a worker then fit beside
    all the group holds, where it is all on that worker."""
    budget = memory_resource(client)
    workers = len(client.scheduler_info()["workers"])
    steps = grid.horizon + 1

    known: dict[tuple, memory.ModelTasks | None] = {}

    def found(spec, model_cells: list[Cell]) -> memory.ModelTasks | None:
        """The model's tasks (``memory.model_tasks``), found once per model."""
        model = (spec.family, spec.n_states, spec.seed)
        if model not in known:
            held = [(c.method, c.setting, c.mode) for c in model_cells]
            params = grid.params[spec.family]
            known[model] = memory.model_tasks(spec.family, spec.n_states, params, held, steps)
        return known[model]

    def held(spec, model_cells: list[Cell]) -> int:
        tasks = found(spec, model_cells)
        return tasks.resident if tasks else 0

    def reserve(spec, model_cells: list[Cell], resident: int) -> plan.Reservations:
        tasks = found(spec, model_cells)
        if not budget or tasks is None:
            return plan.Reservations()
        return reservations(tasks, model_cells, budget, resident)

    return plan.submit(
        client,
        grid,
        cells,
        settings=plan_settings(grid),
        fuse_states=grid.fuse_states,
        reserve=reserve,
        held=held,
        memory=budget * workers if budget else None,
    )


def reservations(
    tasks: memory.ModelTasks, cells: list[Cell], budget: int, resident: int
) -> plan.Reservations:
    """The ``MEMORY`` each task of a model (``tasks``, its ``cells``) reserves of a worker's
    ``budget`` while its group holds ``resident`` bytes: what it holds beyond them, times
    ``budget / (budget - resident)``, at most ``budget`` (all of it, where the group leaves
    nothing): tasks whose reservations fit ``budget`` side by side hold at most what the
    group leaves of a worker's memory. And at most the model's largest estimate
    (``ModelTasks.largest``), where that is less: a group of many models, spread over the
    workers, may hold more than one worker's memory while each model fits a worker with room
    to spare."""
    free, largest = budget - resident, tasks.largest

    def scaled(size: int) -> dict:
        share = budget if free <= 0 else min(budget, math.ceil(size * budget / free))
        return {MEMORY: min(share, largest)}

    return plan.Reservations(
        model=scaled(tasks.model),
        gamma=scaled(max(tasks.run.values())),
        approximation={v: scaled(size) for v, size in tasks.approximation.items()},
        run={mode: scaled(size) for mode, size in tasks.run.items()},
        cell={c: scaled(tasks.cell[c.method, c.setting, c.mode]) for c in cells},
    )
