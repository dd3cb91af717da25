"""The sweep's plan of tasks: shared work once, deterministic keys, two ways to run it.

Per model ``(family, n_states, seed)``: one build and one gamma (an exact
pair search split into tasks of about 2000 rows, or the Doeblin bound above
``gamma_exact_max_states`` or the family's own limit); a family whose models ignore the seed
(``SEEDED = False``, e.g. the LM) builds one model for all seeds. Per model,
mode and seed: one exact reference run (none above ``exact_max_states``) and one
timing task, the exact run timed in rounds with every approximation its cells need
(``timed.timed_runs``); per model, method and setting: one approximation; per cell: the
accuracy pass and the metrics.

``model_plan`` writes this as ``dask.delayed`` tasks. ``run_model`` computes a
model's plan in this process (dask's synchronous scheduler): the tests use it,
and so do workers for models of at most ``fuse_states`` states, whose every
task costs less than a Dask task's own overhead. ``submit`` sends each model
either as one such fused task or as its plan's tasks. Keys name the work and
carry a token of the grid and the timing, so two sweeps on one scheduler never
share a result by accident, while resubmitting the same sweep reuses what is
there.

Models too large to be held side by side run one after the other: a worker keeps a model
and its approximations from their builds until the model's last cell is done, and two
such models at once pause the worker for memory (distributed stops starting tasks at 80%
of its limit) or run it out of it. So models go in groups, consecutive models whose
holdings (``submit``'s ``held``) fit the cluster's memory together; each group's builds
wait for all the cells of the group before it, and a model's cells keep their own errors
(``CellError``) so that one cell's exception does not fail the models after it. Within a
group, each task reserves a worker resource (``Reservations``, from ``submit``'s
``reserve``) sized so that the tasks running side by side on a worker fit beside what its
group holds.
"""

from __future__ import annotations

import contextlib
import functools
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import dask
from dask import delayed
from dask.base import tokenize
from dask.delayed import Delayed
from distributed import Client, Future

from pipeline.kinds.methods import memory, records, tasks, timed
from pipeline.kinds.methods.grid import Cell, MethodsGrid
from pipeline.models import gamma_exact_max_states, seeded
from pipeline.sweep.failures import TRANSIENT, CellError
from pipeline.sweep.timing import Timing


@dataclass(frozen=True)
class Reservations:
    """The worker resources each task of one model holds while it runs (None: none): its
    build's, its mixing rate's (every part), each approximation's build's by (method,
    setting), an exact reference's or a timing task's by mode, each cell's."""

    model: dict | None = None
    gamma: dict | None = None
    approximation: Mapping[tuple[str, float], dict] = field(default_factory=dict)
    run: Mapping[str, dict] = field(default_factory=dict)
    cell: Mapping[Cell, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """What every model's plan shares beyond the grid's coordinates."""

    horizon: int
    observe_every: int
    timing: Timing
    gamma_exact_max_states: int
    exact_max_states: int | None
    token: str = ""
    """Appended to every key: a token of the grid and the timing."""


def gamma_parts(n_states: int) -> int:
    """Tasks sharing an exact gamma: about 2000 rows each, at most 16."""
    return min(16, max(1, n_states // 2000))


def model_plan(
    spec: records.ModelSpec,
    cells: list[Cell],
    settings: Settings,
    *,
    run_cell: Callable = tasks.run_cell,
    after: tuple = (),
    reserved: Reservations = Reservations(),
) -> dict[Cell, Delayed]:
    """The delayed result of each of ``cells``, all of the model ``spec`` (any seeds), each
    computed by ``run_cell`` (``tasks.run_cell``'s signature), the model built after the
    tasks (futures) ``after``, each task reserving what ``reserved`` says."""

    def key(*parts) -> str:
        return "-".join(str(part) for part in (*parts, settings.token))

    def holding(resources: dict | None):
        """Tasks made in the block reserve ``resources`` (nothing where None)."""
        return dask.annotate(resources=resources) if resources else contextlib.nullcontext()

    point = (spec.family, spec.n_states, spec.seed)
    with holding(reserved.model):
        model = delayed(tasks.build)(spec, *after, dask_key_name=key("model", *point))
    limit = min(settings.gamma_exact_max_states, gamma_exact_max_states(spec.family))
    exact_gamma = spec.n_states <= limit
    parts = gamma_parts(spec.n_states) if exact_gamma else 0
    with holding(reserved.gamma):
        shares = [
            delayed(tasks.mixing_part)(
                model, part=k, parts=parts, dask_key_name=key(f"gamma-part{k}", *point)
            )
            for k in range(parts)
        ]
        mixed = delayed(tasks.mixing)(
            model, *shares, exact=exact_gamma, dask_key_name=key("gamma", *point)
        )
    run_exact = settings.exact_max_states is None or spec.n_states <= settings.exact_max_states
    references = {}
    for mode, seed in dict.fromkeys((cell.mode, cell.seed) for cell in cells):
        with holding(reserved.run.get(mode)):
            references[mode, seed] = delayed(tasks.reference)(
                model,
                mode=mode,
                horizon=settings.horizon,
                observe_every=settings.observe_every,
                seed=seed,
                run=run_exact,
                dask_key_name=key("exact", spec.family, spec.n_states, seed, mode),
            )
    approximations = {}
    for method, setting in dict.fromkeys((cell.method, cell.setting) for cell in cells):
        with holding(reserved.approximation.get((method, setting))):
            approximations[method, setting] = delayed(tasks.build_approximation)(
                model,
                method=method,
                setting=setting,
                dask_key_name=key("approximate", *point, method, setting),
            )
    which = {
        (mode, seed): tuple(
            dict.fromkeys((c.method, c.setting) for c in cells if (c.mode, c.seed) == (mode, seed))
        )
        for mode, seed in references
    }
    timings = {}
    for mode, seed in references:
        with holding(reserved.run.get(mode)):
            timings[mode, seed] = delayed(timed.timed_runs)(
                model,
                references[mode, seed],
                *(approximations[key] for key in which[mode, seed]),
                which=which[mode, seed],
                mode=mode,
                timing=settings.timing,
                dask_key_name=key("timing", spec.family, spec.n_states, seed, mode),
            )
    found = {}
    for cell in cells:
        with holding(reserved.cell.get(cell)):
            found[cell] = delayed(run_cell)(
                model,
                approximations[cell.method, cell.setting],
                references[cell.mode, cell.seed],
                mixed,
                timings[cell.mode, cell.seed],
                which=(cell.method, cell.setting),
                mode=cell.mode,
                timing=settings.timing,
                estimate=memory.total(spec, cell, settings.horizon + 1),
                dask_key_name=key("cell", *cell),
            )
    return found


def run_model(spec: records.ModelSpec, cells: list[Cell], settings: Settings) -> list:
    """The results of each of ``cells`` (``tasks.run_cell``'s mappings), computed here, in
    order. A cell that raises (a plug-in method's ``ValueError``) gives its ``CellError``,
    the others are kept; where the model's shared work raises (its build, say), the cells
    are computed one by one, each giving its own result or error. ``TRANSIENT`` exceptions
    fail the task, to be tried again."""
    plan = model_plan(spec, cells, settings, run_cell=functools.partial(_kept, tasks.run_cell))
    try:
        return list(dask.compute(*plan.values(), scheduler="sync"))
    except TRANSIENT:
        raise
    except Exception:  # shared work's own error: what each cell gets
        return [
            _kept(lambda task=task: dask.compute(task, scheduler="sync")[0])
            for task in plan.values()
        ]


def _kept(function: Callable, *args, **kwargs):
    """``function(*args, **kwargs)``, or the ``CellError`` of its own exception
    (``TRANSIENT`` ones raised)."""
    try:
        return function(*args, **kwargs)
    except TRANSIENT:
        raise
    except Exception as error:  # its own error, whatever it is
        return CellError.of(error)


def by_model(grid: MethodsGrid, cells: list[Cell]) -> list[tuple[records.ModelSpec, list[Cell]]]:
    """``cells`` grouped by the model they need, in order; one model serves every seed
    of a family whose models ignore it (it is built with seed 0)."""
    groups: dict[tuple, list[Cell]] = defaultdict(list)
    for cell in cells:
        seed = cell.seed if seeded(cell.family) else 0
        groups[cell.family, cell.n_states, seed].append(cell)
    return [
        (records.ModelSpec(family, n, seed, grid.params[family]), group)
        for (family, n, seed), group in groups.items()
    ]


def submit(
    client: Client,
    grid: MethodsGrid,
    cells: list[Cell],
    *,
    settings: Settings,
    fuse_states: int,
    reserve: Callable[[records.ModelSpec, list[Cell], int], Reservations] = (
        lambda spec, cells, resident: Reservations()
    ),
    held: Callable[[records.ModelSpec, list[Cell]], int] = lambda spec, cells: 0,
    memory: int | None = None,
) -> dict[Future, list[Cell]]:
    """Submit everything ``cells`` need; return each future with the cells it computes.

    A future's result is a cell's results (``tasks.run_cell``'s mapping, or its
    ``CellError``), or a list of them (one per cell, in order) for a fused model. Only these
    futures are returned: shared intermediate results are released as soon as the cells
    that need them finish. Models are submitted one after the other, so earlier ones finish
    first. ``held(spec, cells)`` gives the bytes a model and its approximations take while
    its cells run: consecutive models whose holdings fit ``memory`` (the cluster's, None:
    no limit) make a group, whose builds wait for the cells of the group before it (the
    module's docstring); ``reserve(spec, cells, resident)`` the resources each task of a
    model holds while it runs, ``resident`` the bytes its group holds.
    """
    settings = replace(settings, token=tokenize(grid.fingerprint(), settings)[:10])
    models = by_model(grid, cells)
    groups = _groups([m for m in models if m[0].n_states > fuse_states], held, memory)
    group_of = iter([k for k, group in enumerate(groups) for _ in group])  # in models' order
    resident = [sum(size for _, _, size in group) for group in groups]
    futures: dict[Future, list[Cell]] = {}
    computed_by_group: list[list[Future]] = [[] for _ in groups]
    waits: list[tuple] = [() for _ in groups]  # a task done once a group's cells are
    for spec, model_cells in models:
        if spec.n_states <= fuse_states:
            key = f"model-cells-{spec.family}-{spec.n_states}-{spec.seed}-{tokenize(model_cells)}"
            future = client.submit(
                run_model, spec, model_cells, settings, key=f"{key}-{settings.token}"
            )
            futures[future] = model_cells
            continue
        k = next(group_of)
        if k and not waits[k - 1]:  # groups past the first only where memory is given
            earlier = computed_by_group[k - 1]
            key = f"cells-done-{tokenize([f.key for f in earlier])}-{settings.token}"
            waits[k - 1] = (client.submit(_done, *earlier, key=key),)
        plan = model_plan(
            spec,
            model_cells,
            settings,
            run_cell=functools.partial(_kept, tasks.run_cell),
            after=waits[k - 1] if k else (),
            reserved=reserve(spec, model_cells, resident[k]),
        )
        computed = client.compute(list(plan.values()), optimize_graph=False)
        futures.update({future: [cell] for future, cell in zip(computed, plan, strict=True)})
        computed_by_group[k] += computed
    return futures


def _done(*results) -> None:
    """Nothing, once ``results`` are there: what a group's builds wait for (its results are
    not sent on)."""


def _groups(
    models: list[tuple[records.ModelSpec, list[Cell]]],
    held: Callable[[records.ModelSpec, list[Cell]], int],
    memory: int | None,
) -> list[list[tuple[records.ModelSpec, list[Cell], int]]]:
    """``models`` in consecutive groups whose holdings (``held``, given beside each model)
    fit ``memory`` together (a model that does not fit alone: a group of its own); one group
    where ``memory`` is None."""
    groups: list[list[tuple[records.ModelSpec, list[Cell], int]]] = []
    holding = 0
    for spec, model_cells in models:
        size = held(spec, model_cells)
        if not groups or (memory is not None and holding + size > memory):
            groups.append([])
            holding = 0
        groups[-1].append((spec, model_cells, size))
        holding += size
    return groups
