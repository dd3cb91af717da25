"""The experiment grid: coordinates of the results and the cells to compute.

A cell is one ``(family, n_states, method, setting, seed, mode)`` point: one
approximate run against its exact reference. Cells share work (one model per
``(family, n_states, seed)``, one exact run per model and mode, one
approximation per model, method and setting); the plan turns that sharing into
dependencies. Families may have different sizes and methods different
settings, so the grid need not be a full product: ``in_grid`` marks the cells
that exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from omegaconf import OmegaConf

from pipeline.sweep.config import family_sizes, grid_methods

DIMS = ("family", "n_states", "method", "setting", "seed", "mode")
"""The dimensions of a cell, in the order every result variable uses."""


class Cell(NamedTuple):
    family: str
    n_states: int
    method: str
    setting: float
    seed: int
    mode: str


@dataclass(frozen=True)
class Grid:
    """The grid of a validated config.

    ``sizes`` maps each family to its sizes and ``settings`` each method to its
    settings; ``n_states`` and ``setting`` are their sorted unions.
    """

    families: tuple[str, ...]
    sizes: dict[str, tuple[int, ...]]
    methods: tuple[str, ...]
    settings: dict[str, tuple[float, ...]]
    seeds: tuple[int, ...]
    modes: tuple[str, ...]
    horizon: int
    observe_every: int
    params: dict[str, dict]
    """Model parameters of each family of the grid (``model.<family>``)."""

    DIMS = DIMS

    @classmethod
    def from_config(cls, cfg) -> Grid:
        grid = cfg.grid
        methods = grid_methods(grid)
        return cls(
            families=tuple(grid.families),
            sizes={family: tuple(sorted(s)) for family, s in family_sizes(grid).items()},
            methods=tuple(methods),
            settings={m: tuple(sorted(float(s) for s in v)) for m, v in methods.items()},
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
    def setting(self) -> tuple[float, ...]:
        return tuple(sorted({s for settings in self.settings.values() for s in settings}))

    @property
    def in_grid(self) -> np.ndarray:
        """bool, shape (family, n_states, method, setting): which cells exist."""
        sizes = np.array([[n in self.sizes[f] for n in self.n_states] for f in self.families])
        settings = np.array([[s in self.settings[m] for s in self.setting] for m in self.methods])
        return sizes[:, :, None, None] & settings[None, None, :, :]

    def coords(self) -> dict[str, np.ndarray]:
        """Coordinates of the results: the cell dims and ``t = 0..horizon``."""
        return {
            "family": np.array(self.families, dtype=object),
            "n_states": np.array(self.n_states, dtype=np.int64),
            "method": np.array(self.methods, dtype=object),
            "setting": np.array(self.setting),
            "seed": np.array(self.seeds, dtype=np.int64),
            "mode": np.array(self.modes, dtype=object),
            "t": np.arange(self.horizon + 1),
        }

    def cells(self) -> list[Cell]:
        """Every cell, models in the order they will be built."""
        return [
            Cell(family, n, method, setting, seed, mode)
            for family in self.families
            for n in self.sizes[family]
            for seed in self.seeds
            for method in self.methods
            for setting in self.settings[method]
            for mode in self.modes
        ]

    def index(self, cell: Cell) -> tuple[int, ...]:
        """Positions of ``cell`` along ``DIMS``."""
        return (
            self.families.index(cell.family),
            self.n_states.index(cell.n_states),
            self.methods.index(cell.method),
            self.setting.index(cell.setting),
            self.seeds.index(cell.seed),
            self.modes.index(cell.mode),
        )

    def fingerprint(self) -> str:
        """Everything that determines the results' values, as canonical JSON."""
        return json.dumps(
            {
                "families": self.families,
                "n_states": {f: list(s) for f, s in self.sizes.items()},
                # A list, not a mapping: the order of methods is the order of the coordinate.
                "methods": [[m, list(s)] for m, s in self.settings.items()],
                "seeds": self.seeds,
                "modes": self.modes,
                "horizon": self.horizon,
                "observe_every": self.observe_every,
                "model": self.params,
            },
            sort_keys=True,
        )
