"""The experiment grid: coordinates of the results and the cells to compute.

A cell is one ``(family, n_states, p, seed, mode)`` point: one top-p model run
against its exact reference. Cells share work (one model per
``(family, n_states, seed)``, one exact run per model and mode, one top-p
model per ``p``); the task graph turns that sharing into dependencies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from omegaconf import OmegaConf

from pipeline.config import family_sizes

DIMS = ("family", "n_states", "p", "seed", "mode")
"""The dimensions of a cell, in the order every result variable uses."""


class Cell(NamedTuple):
    family: str
    n_states: int
    p: float
    seed: int
    mode: str


@dataclass(frozen=True)
class Grid:
    """The grid of a validated config.

    ``sizes`` maps each family to its sizes; ``n_states`` is their sorted union,
    so when families have different sizes the grid is not a full product and
    ``in_grid`` marks the ``(family, n_states)`` pairs that exist.
    """

    families: tuple[str, ...]
    sizes: dict[str, tuple[int, ...]]
    p: tuple[float, ...]
    seeds: tuple[int, ...]
    modes: tuple[str, ...]
    horizon: int
    observe_every: int
    params: dict[str, dict]
    """Model parameters of each family of the grid (``model.<family>``)."""

    @classmethod
    def from_config(cls, cfg) -> Grid:
        grid = cfg.grid
        return cls(
            families=tuple(grid.families),
            sizes={family: tuple(sorted(s)) for family, s in family_sizes(grid).items()},
            p=tuple(sorted(float(p) for p in grid.p)),
            seeds=tuple(sorted(grid.seeds)),
            modes=tuple(grid.modes),
            horizon=int(grid.horizon),
            observe_every=int(grid.observe_every),
            params={f: OmegaConf.to_container(cfg.model[f]) for f in grid.families},
        )

    @property
    def n_states(self) -> tuple[int, ...]:
        return tuple(sorted({n for sizes in self.sizes.values() for n in sizes}))

    @property
    def in_grid(self) -> np.ndarray:
        """bool, shape (family, n_states): which sizes each family has."""
        return np.array([[n in self.sizes[f] for n in self.n_states] for f in self.families])

    @property
    def is_product(self) -> bool:
        return bool(self.in_grid.all())

    def coords(self) -> dict[str, np.ndarray]:
        """Coordinates of the results: the cell dims and ``t = 0..horizon``."""
        return {
            "family": np.array(self.families, dtype=object),
            "n_states": np.array(self.n_states, dtype=np.int64),
            "p": np.array(self.p),
            "seed": np.array(self.seeds, dtype=np.int64),
            "mode": np.array(self.modes, dtype=object),
            "t": np.arange(self.horizon + 1),
        }

    def cells(self) -> list[Cell]:
        """Every cell, models in the order they will be built."""
        return [
            Cell(family, n, p, seed, mode)
            for family in self.families
            for n in self.sizes[family]
            for seed in self.seeds
            for p in self.p
            for mode in self.modes
        ]

    def index(self, cell: Cell) -> tuple[int, ...]:
        """Positions of ``cell`` along ``DIMS``."""
        return (
            self.families.index(cell.family),
            self.n_states.index(cell.n_states),
            self.p.index(cell.p),
            self.seeds.index(cell.seed),
            self.modes.index(cell.mode),
        )

    def fingerprint(self) -> str:
        """Everything that determines the results' values, as canonical JSON."""
        return json.dumps(
            {
                "families": self.families,
                "n_states": {f: list(s) for f, s in self.sizes.items()},
                "p": self.p,
                "seeds": self.seeds,
                "modes": self.modes,
                "horizon": self.horizon,
                "observe_every": self.observe_every,
                "model": self.params,
            },
            sort_keys=True,
        )
