"""The methods sweep's grid: the cells of ``methods.grid`` and the coordinates of their store.

A cell is one ``(family, n_states, method, setting, seed, mode)`` point: one
approximate run against its exact reference. Cells share work (one model per
``(family, n_states, seed)``, one exact run per model and mode, one
approximation per model, method and setting); the plan turns that sharing into
dependencies. Families may have different sizes and methods different
settings, so the grid need not be a full product (``in_grid``).
"""

from __future__ import annotations

import json
import operator
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pipeline.methods import METHODS
from pipeline.models import (
    FAMILIES,
    ParameterError,
    family_parameters,
    fixed_size,
    model_fingerprint,
)
from pipeline.sweep.config import as_dict
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.kind import RUN_SETTINGS, Grid
from pipeline.sweep.timing import Timing


class Cell(NamedTuple):
    family: str
    n_states: int
    method: str
    setting: float
    seed: int
    mode: str


def model_parameters(model, families) -> dict[str, dict]:
    """Each family's keyword parameters: its section of ``model`` (the config's ``model``)
    over the family's defaults (a plug-in family's section holds only the keys the config
    sets)."""
    return {f: {**family_parameters(f), **as_dict(model[f])} for f in families}


def _fixed_size(family: str, params: dict) -> int | None:
    """The size ``family``'s parameters fix (a model read from a file), else None."""
    try:
        return fixed_size(family, **params.get(family, {}))
    except ParameterError as error:
        raise ConfigError(f"methods.model.{family}.{error.parameter}", str(error)) from None


def family_sizes(grid, params: dict) -> dict[str, list[int]]:
    """``methods.grid.n_states`` as a mapping family -> sizes. A family whose parameters fix
    its size (``params[family]``: a model file's path) needs none: its size is read where
    the grid gives none (a size that disagrees is its ``check``'s error)."""
    sizes = grid.n_states
    allowed = "a list of integers >= 2, or a mapping family -> list"
    if isinstance(sizes, typing.Mapping):
        extra = sorted(set(sizes) - set(grid.families))
        if extra:
            raise ConfigError(
                "methods.grid.n_states",
                f"family {extra[0]!r} is not in methods.grid.families; a mapping needs one "
                "list of sizes per family of methods.grid.families",
            )
        found = {}
        for family in grid.families:
            if family in sizes:
                found[family] = list(sizes[family])
                continue
            size = _fixed_size(family, params)
            if size is None:
                raise ConfigError(
                    "methods.grid.n_states",
                    f"family {family!r} is missing; a mapping needs one list of sizes per "
                    "family of methods.grid.families",
                )
            found[family] = [size]
        return found
    if sizes is None:
        fixed = {family: _fixed_size(family, params) for family in grid.families}
        found = {family: [size] for family, size in fixed.items() if size is not None}
        if len(found) < len(fixed):
            raise ConfigError("methods.grid.n_states", f"is not set; allowed: {allowed}")
        return found
    if isinstance(sizes, typing.Sequence) and not isinstance(sizes, str):
        return {family: list(sizes) for family in grid.families}
    raise ConfigError("methods.grid.n_states", f"{sizes!r} is not allowed; allowed: {allowed}")


def grid_methods(grid) -> dict[str, list]:
    """``methods.grid.methods`` as a mapping method -> settings."""
    methods = grid.methods
    allowed = "a mapping method -> list of settings, e.g. {topp: [0.5, 0.9], topk: [5]}"
    if methods is None:
        raise ConfigError("methods.grid.methods", f"is not set; allowed: {allowed}")
    if not isinstance(methods, typing.Mapping) or not methods:
        raise ConfigError("methods.grid.methods", f"{methods!r} is not allowed; allowed: {allowed}")
    return {str(method): settings for method, settings in methods.items()}


def _holds(old: list, new: list) -> bool:
    """Whether every value of ``old`` is in ``new``."""
    return old is not None and new is not None and all(value in new for value in old)


def _each(holds):
    """Whether every key of the mapping ``old`` is in ``new``, its value ``holds`` there."""

    def each(old: dict | None, new: dict | None) -> bool:
        old, new = old or {}, new or {}
        return all(key in new and holds(value, new[key]) for key, value in old.items())

    return each


def _contents(families, params: dict) -> dict[str, str]:
    """Each family's ``model_fingerprint`` where it has one (a model file's hash)."""
    found = {}
    for family in families:
        try:
            fingerprint = model_fingerprint(family, **params[family])
        except ParameterError as error:
            raise ConfigError(f"methods.model.{family}.{error.parameter}", str(error)) from None
        if fingerprint is not None:
            found[family] = fingerprint
    return found


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
    """Model parameters of each family of the grid (``methods.model.<family>``)."""
    contents: dict[str, str]
    """What identifies a family's model beyond its parameters (a model file's content hash,
    ``pipeline.models.model_fingerprint``), for the families that have it."""
    exact_max_states: int | None
    """Models with more states get no exact reference (``methods.exact_max_states``)."""
    gamma_exact_max_states: int
    """gamma is exact up to this many states, else the Doeblin lower bound."""
    timing: Timing
    """How cells time their runs (``methods.timing.*``); only whether they do is in the
    identity."""
    fuse_states: int
    """Models with at most this many states run all their cells in one task."""

    Cell = Cell

    @classmethod
    def from_config(cls, cfg) -> MethodsGrid:
        section = cfg.methods
        grid = section.grid
        methods = grid_methods(grid)
        params = model_parameters(section.model, grid.families)
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
            contents=_contents(grid.families, params),
            exact_max_states=section.exact_max_states,
            gamma_exact_max_states=int(section.gamma_exact_max_states),
            timing=Timing(
                repeats=section.timing.repeats,
                min_seconds=section.timing.min_seconds,
                max_repeats=section.timing.max_repeats,
                threads=section.timing.blas_threads,
                enabled=bool(section.timing.enabled),
            ),
            fuse_states=int(section.fuse_states),
        )

    @property
    def n_states(self) -> tuple[int, ...]:
        return tuple(sorted({n for sizes in self.sizes.values() for n in sizes}))

    @property
    def setting(self) -> tuple[float, ...]:
        return tuple(sorted({s for settings in self.settings.values() for s in settings}))

    def axes(self) -> dict[str, Sequence]:
        return {
            "family": self.families,
            "n_states": self.n_states,
            "method": self.methods,
            "setting": self.setting,
            "seed": self.seeds,
            "mode": self.modes,
            "t": range(self.horizon + 1),
        }

    def long_names(self) -> dict[str, str]:
        meanings = ", ".join(f"{m}: {METHODS[m].SETTING}" for m in self.methods)
        return {"setting": f"the method's setting ({meanings})"}

    def cells(self) -> list[tuple]:
        """Every cell (a ``Cell``), models in the order they will be built."""
        return [
            Cell(family, n, method, setting, seed, mode)
            for family in self.families
            for n in self.sizes[family]
            for seed in self.seeds
            for method in self.methods
            for setting in self.settings[method]
            for mode in self.modes
        ]

    def grows(self, stored: dict) -> bool:
        """More values along the cell dims (families, sizes, methods, settings, seeds,
        modes), the settings that make every value (the horizon, the limits, the timing, each
        family's parameters and contents) unchanged."""
        new = json.loads(self.fingerprint())
        growing = {
            "families": _holds,
            "seeds": _holds,
            "modes": _holds,
            "n_states": _each(_holds),
            "methods": lambda old, new: _each(_holds)(dict(old), dict(new)),
            "model": _each(operator.eq),
            "contents": _each(operator.eq),
        }
        return stored != new and all(
            growing.get(key, operator.eq)(stored.get(key), new.get(key))
            for key in set(stored) | set(new)
        )

    def value_free(self) -> dict[str, str]:
        timing = "how runtimes are measured (runtimes are measurements, not values)"
        return (
            RUN_SETTINGS
            | {
                f"methods.timing.{key}": timing
                for key in ("repeats", "min_seconds", "max_repeats", "blas_threads")
            }
            | {"methods.fuse_states": "how cells are grouped into tasks, the same values both ways"}
            | {
                f"methods.model.{family}": "a family this grid does not sweep"
                for family in FAMILIES.names()
                if family not in self.families
            }
        )

    def run_attrs(self) -> dict[str, Any]:
        return {"timing_blas_threads": self.timing.threads}

    def identity(self) -> dict:
        """What makes the stored values, under the names the methods kind's keys had before
        it had a section (``timing.enabled``): existing stores keep their identity."""
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
            "exact_max_states": self.exact_max_states,
            "gamma_exact_max_states": self.gamma_exact_max_states,
            "timing.enabled": self.timing.enabled,
        } | ({"contents": self.contents} if self.contents else {})


def grid(cfg) -> MethodsGrid:
    """The grid of a validated config."""
    return MethodsGrid.from_config(cfg)
