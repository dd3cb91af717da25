"""The sweep's task graph: shared work once, one task per cell, deterministic keys.

Per ``(family, n_states, seed)``: one model build and one gamma; per model and
mode: one exact reference run; per model and ``p``: one top-p build; per cell:
the timed dense/sparse runs and the metrics. Keys name the work and carry a
token of the grid, so two sweeps on one scheduler never share a result by
accident, while resubmitting the same sweep reuses whatever is still there.
"""

from __future__ import annotations

from dask.base import tokenize
from distributed import Client, Future

from pipeline import tasks
from pipeline.grid import Cell, Grid


def submit(
    client: Client, grid: Grid, cells: list[Cell], *, timing, retries: int
) -> dict[Future, Cell]:
    """Submit everything ``cells`` need; return each cell's future.

    Only the cell futures are returned: shared intermediate results are
    released by the scheduler as soon as the cells that need them finish.
    Cells are submitted model by model, so earlier models finish first.
    """
    timing = {
        "repeats": timing.repeats,
        "min_seconds": timing.min_seconds,
        "max_repeats": timing.max_repeats,
        "threads": timing.blas_threads,
    }
    token = tokenize(grid.fingerprint(), timing)[:10]

    def key(*parts) -> str:
        return "-".join(str(part) for part in (*parts, token))

    shared: dict[tuple, Future] = {}

    def once(name: str, parts: tuple, function, *args) -> Future:
        """The future of ``function(*args)``, submitted the first time it is asked for."""
        if (name, parts) not in shared:
            shared[name, parts] = client.submit(
                function, *args, key=key(name, *parts), retries=retries
            )
        return shared[name, parts]

    cell_futures = {}
    for cell in cells:
        point = (cell.family, cell.n_states, cell.seed)
        model = once("model", point, tasks.build, *point, grid.params[cell.family])
        mixing = once("gamma", point, tasks.mixing, model)
        exact = once(
            "exact",
            (*point, cell.mode),
            tasks.reference,
            model,
            cell.mode,
            grid.horizon,
            grid.observe_every,
            cell.seed,
        )
        approximation = once("topp", (*point, cell.p), tasks.approximate, model, cell.p)
        future = client.submit(
            tasks.run_cell,
            model,
            approximation,
            exact,
            mixing,
            cell.p,
            cell.mode,
            **timing,
            key=key("cell", *cell),
            retries=retries,
        )
        cell_futures[future] = cell
    return cell_futures
