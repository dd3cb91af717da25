"""The cells of a learning sweep: ``(family, n_states, seed, sequences, length, method,
setting)``, the problems they share an exact-EM reference in, and what every cell of a
``learning`` section shares."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pipeline.kinds.learning.results import SCHEMA
from pipeline.sweep.config.validation import as_dict
from pipeline.sweep.kind import Grid


class LearningCell(NamedTuple):
    family: str
    n_states: int
    seed: int
    sequences: int
    length: int
    method: str
    setting: float

    @property
    def problem(self) -> ProblemKey:
        """The problem whose exact-EM reference this cell is compared with."""
        return ProblemKey(*self[:5])


class ProblemKey(NamedTuple):
    """A generating model and its data: the cells that share one exact-EM reference."""

    family: str
    n_states: int
    seed: int
    sequences: int
    length: int


@dataclass(frozen=True)
class Settings:
    """What every cell of the ``learning`` section shares (``LearningConfig``)."""

    held_out: int
    iterations: int
    tolerance: float
    pseudocount: float
    noise: float


@dataclass(frozen=True)
class LearningGrid(Grid):
    """The cells of a validated config's ``learning`` section."""

    families: tuple[tuple[str, tuple[int, ...]], ...]
    """(family, its state counts), in the config's order."""
    seeds: tuple[int, ...]
    sequences: tuple[int, ...]
    length: tuple[int, ...]
    methods: tuple[tuple[str, tuple[float, ...]], ...]
    """(method, its settings), in the config's order."""
    settings: Settings

    Cell = LearningCell

    def axes(self) -> dict[str, Sequence]:
        return {
            "family": [name for name, _ in self.families],
            "n_states": sorted({n for _, sizes in self.families for n in sizes}),
            "seed": self.seeds,
            "sequences": self.sequences,
            "length": self.length,
            "method": [name for name, _ in self.methods],
            "setting": sorted({s for _, settings in self.methods for s in settings}),
            "iteration": range(1, self.settings.iterations + 1),
        }

    def cells(self) -> list[LearningCell]:
        """Every cell, largest models first (they take longest), a problem's cells together."""
        problems = sorted(
            (
                ProblemKey(family, n, seed, sequences, length)
                for family, sizes in self.families
                for n in sizes
                for seed in self.seeds
                for sequences in self.sequences
                for length in self.length
            ),
            key=lambda key: -key.n_states * key.sequences * key.length,
        )
        return [
            LearningCell(*key, method, setting)
            for key in problems
            for method, settings in self.methods
            for setting in settings
        ]

    def identity(self) -> dict:
        return {
            "kind": SCHEMA.name,
            "families": {name: list(sizes) for name, sizes in self.families},
            "seeds": list(self.seeds),
            "sequences": list(self.sequences),
            "length": list(self.length),
            "methods": {name: list(settings) for name, settings in self.methods},
            **dataclasses.asdict(self.settings),
        }

    def grows(self, stored: dict) -> bool:
        """More families, sizes, seeds, data sizes, methods or settings, every setting that
        makes a value (``Settings``, the iterations among them) unchanged."""
        new = json.loads(self.fingerprint())
        return stored != new and all(
            _holds(stored.get(key), new.get(key))
            if key in GROWING
            else stored.get(key) == new.get(key)
            for key in set(stored) | set(new)
        )


GROWING = ("families", "seeds", "sequences", "length", "methods")
"""The identity's keys a store grows along."""


def _holds(old, new) -> bool:
    """Whether ``new`` holds every value of ``old``: a list's values, a mapping's keys with
    their lists held."""
    if isinstance(old, dict) and isinstance(new, dict):
        return all(key in new and _holds(value, new[key]) for key, value in old.items())
    return isinstance(old, list) and isinstance(new, list) and all(v in new for v in old)


def grid(cfg) -> LearningGrid:
    """The grid of a validated config."""
    section = as_dict(cfg.learning, resolve=True)
    families = tuple(
        (str(name), tuple(sorted(int(n) for n in sizes)))
        for name, sizes in section.pop("families").items()
    )
    methods = tuple(
        (str(name), tuple(sorted(float(s) for s in settings)))
        for name, settings in section.pop("methods").items()
    )
    return LearningGrid(
        families=families,
        seeds=tuple(sorted(section.pop("seeds"))),
        sequences=tuple(sorted(section.pop("sequences"))),
        length=tuple(sorted(section.pop("length"))),
        methods=methods,
        settings=Settings(**section),
    )
