"""The cells of a training sweep: ``(n_states, parameterisation, seed)`` and what every
cell of a config's ``training`` section shares."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pipeline.kinds.training import results
from pipeline.kinds.training.config import is_large
from pipeline.sweep.config import as_dict
from pipeline.sweep.kind import Grid

DEFAULT_MAX_EPOCHS = 20
"""``max_epochs`` where the config leaves it null."""


class TrainingCell(NamedTuple):
    n_states: int
    parameterisation: str
    seed: int


@dataclass(frozen=True)
class Settings:
    """What every cell of a ``training`` section shares (``TrainingConfig``; ``max_epochs``
    resolved, the ``large`` section's keys as ``large_states``, ``large_state_dropout`` and
    ``large_learning_rate``, the last ``learning_rate`` where that key is null)."""

    max_epochs: int
    patience: int | None
    max_seconds: float | None
    clusters: int
    clustering: str
    state_dropout: float
    max_states: dict[str, int]
    batch: int
    length: int
    n_tokens: int | None
    train_chunks: int | None
    held_out_chunks: int | None
    learning_rate: float
    lr_decay: float
    lr_patience: int
    clip: float | None
    dim: int
    delta: int
    max_features: int | None
    grow: bool
    threads: int
    corpus: str | None
    large_states: int | None
    large_state_dropout: float
    large_learning_rate: float

    def is_large(self, n_states: int) -> bool:
        """Whether a cell of ``n_states`` trains with ``training.large``'s settings."""
        return is_large(n_states, self.large_states)

    def learning_rate_at(self, n_states: int) -> float:
        """Adam's step size of a cell of ``n_states``."""
        return self.large_learning_rate if self.is_large(n_states) else self.learning_rate

    def state_dropout_at(self, n_states: int) -> float:
        """The state dropout of a cell of ``n_states``."""
        return self.large_state_dropout if self.is_large(n_states) else self.state_dropout

    def key(self) -> str:
        """The settings as canonical JSON: what a worker caches the sweep's shared data by."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


@dataclass(frozen=True)
class TrainingGrid(Grid):
    """The cells of a validated config's ``training`` section and what every cell shares."""

    n_states: tuple[int, ...]
    parameterisations: tuple[str, ...]
    seeds: tuple[int, ...]
    settings: Settings

    Cell = TrainingCell

    def axes(self) -> dict[str, Sequence]:
        return {
            "n_states": self.n_states,
            "parameterisation": self.parameterisations,
            "seed": self.seeds,
            "epoch": tuple(range(self.settings.max_epochs + 1)),
            "baseline": results.BASELINES,
            "ngram": results.NGRAMS,
        }

    def cells(self) -> list[TrainingCell]:
        """Every cell, largest models first (they take longest); a parameterisation named in
        ``max_states`` only up to its size there."""
        return [
            TrainingCell(n, name, seed)
            for n in reversed(self.n_states)
            for name in self.parameterisations
            for seed in self.seeds
            if n <= self.settings.max_states.get(name, n)
        ]

    def identity(self) -> dict:
        return {
            "kind": results.SCHEMA.name,
            "n_states": self.n_states,
            "parameterisations": self.parameterisations,
            "seeds": self.seeds,
            **_without_unused_large(dataclasses.asdict(self.settings)),
        }


def _without_unused_large(settings: dict) -> dict:
    """``settings`` without the ``large_*`` keys where no cell is large: they change no value,
    and a store made before ``training.large`` keeps its identity."""
    if settings["large_states"] is not None:
        return settings
    return {key: value for key, value in settings.items() if not key.startswith("large_")}


def grid(cfg) -> TrainingGrid:
    """The grid of a validated config."""
    training = as_dict(cfg.training, resolve=True)
    training["max_epochs"] = training["max_epochs"] or DEFAULT_MAX_EPOCHS
    large = training.pop("large")
    training |= {
        "large_states": large["n_states"],
        "large_state_dropout": large["state_dropout"],
        "large_learning_rate": large["learning_rate"] or training["learning_rate"],
    }
    return TrainingGrid(
        n_states=tuple(sorted(training.pop("n_states"))),
        parameterisations=tuple(training.pop("parameterisations")),
        seeds=tuple(sorted(training.pop("seeds"))),
        settings=Settings(**training),
    )
