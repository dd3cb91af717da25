"""The contract every sweep kind passes, by its registered name (a built-in or a plug-in of
the entry-point group ``pipeline.kinds``): what a reader of its stores needs
(``check_schema``: no Dask, no Hydra), the ``pipeline.sweep.kind.SweepKind`` interface of its
sweep and its report (``check_interface``), and a config of it composed, checked and turned
into cells (``check_grid``: imports Hydra and Dask when called).
``check_kind`` runs them all; each raises ``AssertionError`` naming what is wrong.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from pipeline.results import KINDS, Kind, Schema, status_variables


def _kind(kind: str) -> Kind:
    """The registered kind of that name; ``AssertionError`` naming those registered."""
    try:
        return KINDS.lookup(kind)
    except ValueError as error:  # unknown, or a plug-in that cannot be used
        raise AssertionError(str(error)) from None


def check_schema(kind: str) -> None:
    """The kind's ``Schema`` is named ``kind``; every variable's dims start with cell dims (all
    of them, or those it varies over), in their order; the status variables come last,
    ``done`` the very last; every coordinate with a ``long_name`` is a dim of a variable."""
    schema = _kind(kind).schema
    assert isinstance(schema, Schema), f"{kind}: its schema is a {type(schema).__name__}"
    assert schema.name == kind, f"the schema of {kind} is named {schema.name!r}"
    assert schema.dims, f"{kind}: a schema without cell dims"
    for name, variable in schema.variables.items():
        cell = tuple(dim for dim in schema.dims if dim in variable.dims)
        assert variable.dims[: len(cell)] == cell, f"{kind}: {name} has dims {variable.dims}"
    status = list(status_variables(schema.dims))
    assert list(schema.variables)[-len(status) :] == status, f"{kind}: status variables not last"
    dims = {dim for variable in schema.variables.values() for dim in variable.dims}
    assert set(schema.coordinates) <= dims, f"{kind}: {sorted(set(schema.coordinates) - dims)}"


def check_interface(kind: str) -> None:
    """The kind's sweep module has the ``SweepKind`` interface (``SCHEMA``, the kind's own;
    ``SECTION``, the kind's name; ``CONFIG``, a dataclass; ``validate``, ``grid``,
    ``submit`` and ``summary``, functions) and its report is a function."""
    found = _kind(kind)
    assert callable(found.load("report")), f"{kind}: its report is not a function"
    sweep = found.load("sweep")
    assert sweep.SCHEMA is found.schema, f"{kind}: the sweep's SCHEMA is not the kind's"
    assert sweep.SECTION == kind, f"{kind}: SECTION {sweep.SECTION!r}"
    assert dataclasses.is_dataclass(sweep.CONFIG), f"{kind}: CONFIG is not a dataclass"
    for function in ("validate", "grid", "submit", "summary"):
        assert callable(getattr(sweep, function, None)), f"{kind}: no function {function}"


def check_grid(kind: str, *overrides: str) -> None:
    """``kind=<kind>`` with ``overrides`` (as on the command line: ``experiment=NAME``, keys of
    its section) composes and passes its checks; its grid's axes start
    with the schema's cell dims and hold every dim of its variables; each cell is a ``Cell``
    of the cell dims, one value of each axis; its identity is JSON."""
    from pipeline.sweep.config import compose, validate
    from pipeline.sweep.kind import Grid

    cfg, _ = compose([f"kind={kind}", *overrides])
    sweep = validate(cfg)
    schema = _kind(kind).schema
    assert sweep.SCHEMA is schema, f"kind={kind} runs the sweep of {sweep.SCHEMA.name}"
    grid = sweep.grid(cfg)
    assert isinstance(grid, Grid), f"{kind}: its grid is a {type(grid).__name__}"
    axes = grid.axes()
    assert tuple(axes)[: len(schema.dims)] == schema.dims, f"{kind}: axes {list(axes)}"
    dims = {dim for variable in schema.variables.values() for dim in variable.dims}
    assert dims <= set(axes), f"{kind}: no axes for {sorted(dims - set(axes))}"
    cells = grid.cells()
    assert cells, f"{kind}: the grid has no cells"
    for cell in cells:
        assert isinstance(cell, grid.Cell) and len(cell) == len(schema.dims), (kind, cell)
        for dim, value in zip(schema.dims, cell, strict=True):
            assert value in list(axes[dim]), f"{kind}: {dim}={value!r} is on no axis"
    json.dumps(grid.identity())


CHECKS: tuple[Callable[..., None], ...] = (check_schema, check_interface, check_grid)
"""Every check of a kind, each a function of its name (``check_grid`` takes overrides after it)."""


def check_kind(kind: str, *overrides: str) -> None:
    """Run every check of ``CHECKS`` on the kind registered as ``kind``; ``overrides`` make
    the config whose grid ``check_grid`` checks (none: the kind's defaults)."""
    check_schema(kind)
    check_interface(kind)
    check_grid(kind, *overrides)
