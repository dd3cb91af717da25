"""The methods sweep's grid: the cells of ``grid`` and the coordinates of their store.

A cell is one ``(family, n_states, method, setting, seed, mode)`` point: one
approximate run against its exact reference. Cells share work (one model per
``(family, n_states, seed)``, one exact run per model and mode, one
approximation per model, method and setting); the plan turns that sharing into
dependencies. Families may have different sizes and methods different
settings, so the grid need not be a full product (``in_grid``).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import NamedTuple

from omegaconf import OmegaConf

from pipeline.methods import METHODS
from pipeline.models import ParameterError, fixed_size
from pipeline.sweep.config import ConfigError
from pipeline.sweep.kinds.base import Grid


class Cell(NamedTuple):
    family: str
    n_states: int
    method: str
    setting: float
    seed: int
    mode: str


def _fixed_sizes(grid, params: dict) -> dict[str, list[int]]:
    """The sizes of the families whose parameters fix them (a model read from a file)."""
    fixed = {}
    for family in grid.families:
        try:
            size = fixed_size(family, **params.get(family, {}))
        except ParameterError as error:
            raise ConfigError(f"model.{family}.{error.parameter}", str(error)) from None
        if size is not None:
            fixed[family] = [size]
    return fixed


def family_sizes(grid, params: dict) -> dict[str, list[int]]:
    """``grid.n_states`` as a mapping family -> sizes; a family whose parameters fix its size
    (``params[family]``, e.g. a model file's path) needs none, and a size that is not the
    fixed one is a ``ConfigError``."""
    sizes = grid.n_states
    fixed = _fixed_sizes(grid, params)
    allowed = "a list of integers >= 2, or a mapping family -> list"
    if sizes is None:
        if len(fixed) == len(grid.families):
            return fixed
        raise ConfigError("grid.n_states", f"is not set; allowed: {allowed}")
    if isinstance(sizes, typing.Mapping):
        extra = sorted(set(sizes) - set(grid.families))
        missing = [f for f in grid.families if f not in sizes and f not in fixed]
        if extra or missing:
            problem = (
                f"{extra[0]!r} is not in grid.families" if extra else f"{missing[0]!r} is missing"
            )
            raise ConfigError(
                "grid.n_states",
                f"family {problem}; a mapping needs one list of sizes per family of grid.families",
            )
        found = {family: list(sizes.get(family, fixed.get(family))) for family in grid.families}
    elif isinstance(sizes, typing.Sequence) and not isinstance(sizes, str):
        found = {family: list(sizes) for family in grid.families}
    else:
        raise ConfigError("grid.n_states", f"{sizes!r} is not allowed; allowed: {allowed}")
    for family, size in fixed.items():
        if found[family] != size:
            key = "grid.n_states" + (f".{family}" if isinstance(sizes, typing.Mapping) else "")
            raise ConfigError(
                key,
                f"{found[family]} is not allowed for {family}: its model.{family} holds a model "
                f"of {size[0]} states; allowed: [{size[0]}], or leave {family} out of a mapping",
            )
    return found


def grid_methods(grid) -> dict[str, list]:
    """``grid.methods`` (or the shorthand ``grid.p``) as a mapping method -> settings."""
    if grid.p is not None and grid.methods is not None:
        raise ConfigError(
            "grid.p",
            "is shorthand for grid.methods={topp: [...]}; set one of grid.p and grid.methods",
        )
    if grid.p is not None:
        return {"topp": list(grid.p)}
    methods = grid.methods
    allowed = "a mapping method -> list of settings, e.g. {topp: [0.5, 0.9], topk: [5]}"
    if methods is None:
        raise ConfigError("grid.methods", f"is not set; allowed: {allowed}, or grid.p=[...]")
    if not isinstance(methods, typing.Mapping) or not methods:
        raise ConfigError("grid.methods", f"{methods!r} is not allowed; allowed: {allowed}")
    return {str(method): settings for method, settings in methods.items()}


@dataclass(frozen=True)
class MethodsGrid(Grid):
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

    Cell = Cell

    @classmethod
    def from_config(cls, cfg) -> MethodsGrid:
        grid = cfg.grid
        methods = grid_methods(grid)
        params = {f: OmegaConf.to_container(cfg.model[f]) for f in grid.families}
        return cls(
            families=tuple(grid.families),
            sizes={family: tuple(sorted(s)) for family, s in family_sizes(grid, params).items()},
            methods=tuple(methods),
            settings={m: tuple(sorted(float(s) for s in v)) for m, v in methods.items()},
            seeds=tuple(sorted(grid.seeds)),
            modes=tuple(grid.modes),
            horizon=int(grid.horizon),
            observe_every=int(grid.observe_every),
            params=params,
        )

    @property
    def n_states(self) -> tuple[int, ...]:
        return tuple(sorted({n for sizes in self.sizes.values() for n in sizes}))

    @property
    def setting(self) -> tuple[float, ...]:
        return tuple(sorted({s for settings in self.settings.values() for s in settings}))

    def axes(self) -> dict[str, tuple]:
        return {
            "family": self.families,
            "n_states": self.n_states,
            "method": self.methods,
            "setting": self.setting,
            "seed": self.seeds,
            "mode": self.modes,
            "t": tuple(range(self.horizon + 1)),
        }

    def long_names(self) -> dict[str, str]:
        meanings = ", ".join(f"{m}: {METHODS[m].SETTING}" for m in self.methods)
        return {"setting": f"the method's setting ({meanings})"}

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

    def identity(self) -> dict:
        return {
            "families": self.families,
            "n_states": {f: list(s) for f, s in self.sizes.items()},
            # A list, not a mapping: the order of methods is the order of the coordinate.
            "methods": [[m, list(s)] for m, s in self.settings.items()],
            "seeds": self.seeds,
            "modes": self.modes,
            "horizon": self.horizon,
            "observe_every": self.observe_every,
            "model": self.params,
        }
