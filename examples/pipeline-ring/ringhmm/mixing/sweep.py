"""The sweep of ``ring_mixing`` (``pipeline.sweep.kind.SweepKind``): a config with
``kind=ring_mixing`` and a ``ring_mixing`` section runs one Dask task per cell."""

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from pipeline.inference import predict
from pipeline.metrics import minimal_mixing_rate, total_variation
from pipeline.models import build_model
from pipeline.sweep.config import ConfigError, check_list
from pipeline.sweep.kind import Grid, submit_each
from ringhmm.mixing.results import SCHEMA, MixingRecord, summary  # noqa: F401 - the interface's summary

SECTION = "ring_mixing"


@dataclass
class MixingConfig:
    n_states: list[int] = field(default_factory=lambda: [8, 16])
    """Ring sizes."""
    reaches: list[int] = field(default_factory=lambda: [1, 3])
    """How many states ahead a row steps (the family's ``reach``)."""
    horizon: int = 20
    """Steps t = 0..horizon."""


CONFIG = MixingConfig


class MixingCell(NamedTuple):
    n_states: int
    reach: int


@dataclass(frozen=True)
class MixingGrid(Grid):
    n_states: tuple[int, ...]
    reaches: tuple[int, ...]
    horizon: int

    Cell = MixingCell

    def axes(self) -> dict:
        return {"n_states": self.n_states, "reach": self.reaches, "t": range(self.horizon + 1)}

    def cells(self) -> list[MixingCell]:
        return [MixingCell(n, r) for n in self.n_states for r in self.reaches]

    def identity(self) -> dict:
        return {"kind": SCHEMA.name, "n_states": self.n_states, "reaches": self.reaches,
                "horizon": self.horizon}  # fmt: skip


def validate(cfg) -> None:
    section = cfg.ring_mixing
    check_list("ring_mixing.n_states", section.n_states, int, "integers >= 3")
    check_list("ring_mixing.reaches", section.reaches, int, "integers >= 1")
    for n in section.n_states:
        for reach in section.reaches:
            if not 3 <= n or not 1 <= reach < n:
                raise ConfigError(
                    "ring_mixing.reaches", f"{reach} with n_states={n}; allowed: 1 <= reach < n"
                )
    if section.horizon < 1:
        raise ConfigError("ring_mixing.horizon", f"{section.horizon}; allowed: integers >= 1")


def grid(cfg) -> MixingGrid:
    section = cfg.ring_mixing
    return MixingGrid(tuple(sorted(section.n_states)), tuple(sorted(section.reaches)),
                      int(section.horizon))  # fmt: skip


def mixing_cell(cell: MixingCell, horizon: int) -> MixingRecord:
    """gamma and the TV between the walks from state 0 and state n/2, t = 0..horizon."""
    hmm = build_model("ring", cell.n_states, reach=cell.reach)
    starts = np.zeros((2, cell.n_states))
    starts[0, 0] = starts[1, cell.n_states // 2] = 1
    walks = predict(hmm, horizon, initial=starts)  # (2, horizon + 1, n_states)
    return MixingRecord(total_variation(*walks), minimal_mixing_rate(hmm.transition))


def submit(client, grid: MixingGrid, cells: list, *, store) -> dict:
    return submit_each(client, mixing_cell, cells, grid.horizon, prefix="ring_mixing")
