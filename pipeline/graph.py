"""The sweep's task graph: shared work once, deterministic keys.

Per ``(family, n_states, seed)``: one model build and one gamma (an exact pair
search split into tasks of about 2000 rows, or the Doeblin bound above
``gamma_exact_max_states``); per model and
mode: one exact reference run; per model and ``p``: one top-p build; per cell:
the timed exact/top-p runs and the metrics (top-p alone, judged by the online
certificate, above ``exact_max_states``). Models of at most ``fuse_states``
states do all of that in a single task (``tasks.run_model``), because a Dask
task costs milliseconds and their work costs less. Keys name the work and carry
a token of the grid and the timing, so two sweeps on one scheduler never share
a result by accident, while resubmitting the same sweep reuses what is there.
"""

from __future__ import annotations

from collections import defaultdict

from dask.base import tokenize
from distributed import Client, Future

from pipeline import tasks
from pipeline.grid import Cell, Grid


def _gamma_parts(n_states: int) -> int:
    """Dask tasks sharing an exact gamma: about 2000 rows each, at most 16."""
    return min(16, max(1, n_states // 2000))


def submit(
    client: Client,
    grid: Grid,
    cells: list[Cell],
    *,
    timing,
    retries: int,
    fuse_states: int,
    gamma_exact_max_states: int,
    exact_max_states: int | None,
) -> dict[Future, list[Cell]]:
    """Submit everything ``cells`` need; return each future with the cells it computes.

    A future's result is a ``tasks.CellResult``, or a list of them (one per
    cell, in order) for a fused model. Only these futures are returned: shared
    intermediate results are released as soon as the cells that need them
    finish. Cells are submitted model by model, so earlier models finish first.
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

    by_model: dict[tuple, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_model[cell.family, cell.n_states, cell.seed].append(cell)
    shared: dict[tuple, Future] = {}

    def once(name: str, parts: tuple, function, *args) -> Future:
        """The future of ``function(*args)``, submitted the first time it is asked for."""
        if (name, parts) not in shared:
            shared[name, parts] = client.submit(
                function, *args, key=key(name, *parts), retries=retries
            )
        return shared[name, parts]

    futures = {}
    for point, model_cells in by_model.items():
        family, n_states, seed = point
        run_exact = exact_max_states is None or n_states <= exact_max_states
        if n_states <= fuse_states:
            pairs = [(cell.p, cell.mode) for cell in model_cells]
            future = client.submit(
                tasks.run_model,
                *point,
                grid.params[family],
                pairs,
                grid.horizon,
                grid.observe_every,
                gamma_exact_max_states,
                run_exact,
                **timing,
                key=key("model-cells", *point, tokenize(pairs)),
                retries=retries,
            )
            futures[future] = model_cells
            continue
        model = once("model", point, tasks.build, *point, grid.params[family])
        gamma_exact = n_states <= gamma_exact_max_states
        parts = _gamma_parts(n_states) if gamma_exact else 0
        shares = [
            once(f"gamma-part{k}", point, tasks.mixing_part, model, k, parts) for k in range(parts)
        ]
        mixing = once("gamma", point, tasks.mixing, model, gamma_exact, *shares)
        for cell in model_cells:
            exact = once(
                "exact",
                (*point, cell.mode),
                tasks.reference,
                model,
                cell.mode,
                grid.horizon,
                grid.observe_every,
                seed,
                run_exact,
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
            futures[future] = [cell]
    return futures
