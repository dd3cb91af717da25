"""What a sweep kind's store holds, for every layer: the parts of its schema (``Variable``,
``status_variables``, ``Record``, ``Schema``) and the helpers of its summary table. Imports
neither Hydra nor Dask, and nothing of ``pipeline`` but the standard library and numpy: every
kind's ``results`` module is built on it.

Its namesake ``pipeline.sweep.config.schema`` is the schema of a sweep's config; this one is
the schema of its store.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Variable:
    """A result variable: its dims, ``units`` and ``long_name`` attributes and dtype."""

    dims: tuple[str, ...]
    units: str
    long_name: str
    dtype: str = "float64"
    missing: str = ""
    """When the variable holds NaN for a cell that is done, and why (the ``missing`` attribute)."""
    timed: bool = False
    """A clock reading, or a ratio of them, taken by the sweep's timing policy: its
    ``warmup`` attribute says how the timed calls were warmed up (``pipeline.sweep.timing``)."""


def status_variables(dims: tuple[str, ...]) -> dict[str, Variable]:
    """Every sweep's status of a cell, over ``dims``; ``done`` last, so a flush writes it last."""
    return {
        "failed": Variable(dims, "1", "the cell failed after every retry", "bool"),
        "error": Variable(dims, "1", "error message of a failed cell", "str"),
        "done": Variable(dims, "1", "the cell finished and its results are stored", "bool"),
    }


@dataclass(frozen=True)
class Record:
    """What one cell of a kind computes: a frozen dataclass that subclasses this, one field
    per variable of its kind's schema but the status ones (``status_variables``), each typed
    and named as the variable is (``Schema`` checks that they agree). A field's value is the
    cell's part of the variable: a number, or an array over the variable's own dims (``t``,
    ``epoch``, ...), in their order."""

    def values(self) -> dict[str, object]:
        """Variable name -> this cell's value, as the store records it."""
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}


@dataclass(frozen=True)
class Schema:
    """What the store of one sweep kind holds.

    A cell is one point of ``dims``; every variable's dims start with them (in that order)
    and may add dims of its own (``t``, ``epoch``, ``p``). The store is chunked by the first
    two dims. Where a grid is not a full product, the boolean ``in_grid`` over
    ``in_grid_dims`` marks which cells exist. A cell's task returns a ``record``; a schema
    whose record's fields are not its variables (the status ones aside) is a ``TypeError``
    where it is made.
    """

    name: str
    """The store's ``kind`` attribute (``DEFAULT_KIND``'s stores carry none)."""
    dims: tuple[str, ...]
    variables: dict[str, Variable]
    """Every variable written cell by cell; ``done`` is last."""
    record: type[Record]
    """What a cell's task returns: a field per variable, but the status ones."""
    coordinates: dict[str, str] = field(default_factory=dict)
    """``long_name`` of each coordinate that has one."""
    in_grid_dims: tuple[str, ...] = ()
    in_grid_name: str = ""
    """``long_name`` of ``in_grid``."""

    def __post_init__(self) -> None:
        fields = [item.name for item in dataclasses.fields(self.record)]
        wanted = [name for name in self.variables if name not in status_variables(self.dims)]
        if sorted(fields) != sorted(wanted):
            raise TypeError(
                f"the {self.name} schema's record {self.record.__name__} has the fields "
                f"{sorted(set(fields) - set(wanted))} that are no variables, and lacks "
                f"{sorted(set(wanted) - set(fields))}"
            )


def finite_median(array) -> float:
    """The median of the finite values (NaN marks cells not done); NaN if there are none."""
    values = np.asarray(array, dtype=float)
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else float("nan")


def shown(value: float, spec: str) -> str:
    """``value`` formatted by ``spec`` (``".4f"``); ``-`` where it is NaN: never measured (a
    mode without prediction, no exact reference, no cell done), never printed as ``nan``."""
    return format(value, spec) if np.isfinite(value) else "-"


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """Right-aligned columns, two spaces apart, for a terminal."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)
