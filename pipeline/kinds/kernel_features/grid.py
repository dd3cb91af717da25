"""The cells of a kernel-features sweep: ``(n_states, temperature, feature_map)``, each
with every feature count, and what every cell of a ``kernel_features`` section shares."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pipeline.kinds.kernel_features.results import SCHEMA
from pipeline.sweep.config.validation import as_dict
from pipeline.sweep.kind import Grid


class FeaturesCell(NamedTuple):
    n_states: int
    temperature: float
    feature_map: str


@dataclass(frozen=True)
class Settings:
    """What every cell of the ``kernel_features`` section shares (``KernelFeaturesConfig``)."""

    dim: int
    rows: int
    seed: int
    threshold: float


@dataclass(frozen=True)
class FeaturesGrid(Grid):
    """The cells of a validated config's ``kernel_features`` section."""

    n_states: tuple[int, ...]
    temperatures: tuple[float, ...]
    feature_maps: tuple[str, ...]
    n_features: tuple[int, ...]
    settings: Settings

    Cell = FeaturesCell

    def axes(self) -> dict[str, Sequence]:
        return {
            "n_states": self.n_states,
            "temperature": self.temperatures,
            "feature_map": self.feature_maps,
            "n_features": self.n_features,
        }

    def cells(self) -> list[FeaturesCell]:
        """Every cell, largest state counts first (they take longest)."""
        return [
            FeaturesCell(n, temperature, name)
            for n in reversed(self.n_states)
            for temperature in self.temperatures
            for name in self.feature_maps
        ]

    def identity(self) -> dict:
        return {"kind": SCHEMA.name, **self.axes(), **dataclasses.asdict(self.settings)}


def grid(cfg) -> FeaturesGrid:
    """The grid of a validated config."""
    section = as_dict(cfg.kernel_features, resolve=True)
    return FeaturesGrid(
        n_states=tuple(sorted(section.pop("n_states"))),
        temperatures=tuple(sorted(float(t) for t in section.pop("temperatures"))),
        feature_maps=tuple(section.pop("feature_maps")),
        n_features=tuple(sorted(section.pop("n_features"))),
        settings=Settings(**section),
    )
