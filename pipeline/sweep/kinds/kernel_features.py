"""The kernel-features sweep: how many random features F a softmax over n states needs
(Section 6 of Chiu, Deng and Rush, *Scaling Hidden Markov Language Models*), for the
positive feature map of the kernel HMMs beside random Fourier features.

A config with a ``kernel_features`` section (``experiment=kernel_features``) computes one
cell per ``(n_states, temperature, feature_map)`` as a Dask task (``features_cell``):
Gaussian embeddings of ``n_states`` states at the temperature, the exact softmax rows of
``rows`` sampled states, and the kernel rows of every feature count (the first F of one
map of the largest count; ``pipeline.hmmlm.feature_maps``). The store keeps what
``pipeline.kinds.kernel_features.results`` lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from distributed import Client, Future

from pipeline.hmmlm import feature_maps
from pipeline.kinds.kernel_features import results
from pipeline.sweep.config import as_dict, check_list
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.schema import KernelFeaturesConfig
from pipeline.sweep.kind import Grid, submit_each
from pipeline.sweep.timing import once

SCHEMA = results.SCHEMA
SECTION = "kernel_features"
CONFIG = KernelFeaturesConfig
summary = results.summary


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


def validate(cfg) -> None:
    """Raise ``ConfigError`` naming the first invalid key of ``kernel_features``."""
    section = cfg.kernel_features
    check_list("kernel_features.n_states", section.n_states, int, "integers >= 2")
    check_list("kernel_features.n_features", section.n_features, int, "even integers >= 2")
    check_list("kernel_features.temperatures", section.temperatures, (int, float), "numbers > 0")
    allowed = ", ".join(feature_maps.FEATURE_MAPS)
    check_list("kernel_features.feature_maps", section.feature_maps, str, allowed)
    for key, values, ok, allowed_values in (
        ("n_features", section.n_features, lambda f: f % 2 == 0, "even integers >= 2"),
        ("feature_maps", section.feature_maps, lambda m: m in feature_maps.FEATURE_MAPS, allowed),
    ):
        for value in values:
            if not ok(value):
                raise ConfigError(
                    f"kernel_features.{key}", f"{value!r} is not allowed; allowed: {allowed_values}"
                )


def _rng(settings: Settings, cell: FeaturesCell, stream: int) -> np.random.Generator:
    """A generator of the cell's state count and temperature (``stream`` 0: the embeddings,
    shared by both maps; 1 + the map's index: its features)."""
    key = [settings.seed, cell.n_states, round(cell.temperature * 1_000_000), stream]
    return np.random.default_rng(key)


def features_cell(
    cell: FeaturesCell, n_features: tuple[int, ...], settings: Settings
) -> dict[str, object]:
    """Measure one cell: the rows' TV for every feature count, and the seconds of the
    whole cell after its warm-up (``pipeline.sweep.timing.once``)."""

    def measure() -> tuple[feature_maps.RowErrors, int]:
        e = feature_maps.embeddings(
            cell.n_states, settings.dim, cell.temperature, settings.rows,
            _rng(settings, cell, 0), dtype=np.float32,
        )  # fmt: skip
        exact = feature_maps.softmax_rows(e)
        stream = 1 + feature_maps.FEATURE_MAPS.index(cell.feature_map)
        rng = _rng(settings, cell, stream)
        kernel = feature_maps.kernel_rows(e, cell.feature_map, n_features, rng)
        return feature_maps.row_errors(exact, kernel), len(e.U)

    (errors, rows), seconds = once(measure)
    return {
        "row_tv": errors.median,
        "row_tv_p90": errors.p90,
        "negative_entries": errors.negative,
        "rows": rows,
        "seconds": seconds,
    }


def submit(
    client: Client, grid: FeaturesGrid, cells: list[FeaturesCell], *, store: Path
) -> dict[Future, list[FeaturesCell]]:
    """One task per cell; the future of each and the cells it computes."""
    return submit_each(
        client,
        features_cell,
        cells,
        grid.n_features,
        grid.settings,
        prefix="features",
    )
