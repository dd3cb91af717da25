"""The cells of a coupled sweep: ``(model, chains, n_states, eps, seed, observe)``, where a
model is the seeded ``coupled`` family (``FAMILY``) or a relational spec grounded at a domain,
and what every cell of a ``coupled`` section shares (``Settings``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pipeline.kinds.coupled.results import SCHEMA
from pipeline.kinds.coupled.specs import grounded
from pipeline.sweep.config.validation import as_dict
from pipeline.sweep.kind import Grid
from pipeline.sweep.timing import Timing

FAMILY = "coupled"
"""The ``model`` coordinate of the seeded mixed-memory family; other values name specs."""


@dataclass(frozen=True)
class Settings:
    """The ``coupled`` section's settings every cell shares (``CoupledConfig``), as given."""

    n_observations: int
    alpha: float
    horizon: int
    observe_every: int
    topp: tuple[float, ...]
    tolerance: float
    max_iterations: int
    exact_max_states: int
    repeats: int
    budget: float

    @property
    def timing(self) -> Timing:
        """Every method timed in rounds: at least one, as many as fit ``budget`` seconds,
        at most ``repeats``."""
        return Timing(repeats=1, min_seconds=self.budget, max_repeats=self.repeats)


class CoupledCell(NamedTuple):
    model: str
    chains: int
    n_states: int
    eps: float
    seed: int
    observe: str


@dataclass(frozen=True)
class CoupledGrid(Grid):
    """The cells of a validated config's ``coupled`` section.

    ``shapes`` maps each model to its ``(chains, n_states)`` pairs; ``domains`` maps a
    relational model's pair to its domain (JSON of type -> number of constants kept).
    """

    models: tuple[str, ...]
    shapes: dict[str, tuple[tuple[int, int], ...]]
    domains: dict[tuple[str, int, int], str]
    eps: tuple[float, ...]
    seeds: tuple[int, ...]
    observe: tuple[str, ...]
    settings: Settings

    Cell = CoupledCell

    @property
    def chains(self) -> tuple[int, ...]:
        return tuple(sorted({k for pairs in self.shapes.values() for k, _ in pairs}))

    @property
    def n_states(self) -> tuple[int, ...]:
        return tuple(sorted({n for pairs in self.shapes.values() for _, n in pairs}))

    def observed(self, model: str) -> tuple[str, ...]:
        """What ``model``'s cells observe: every setting for the family, chain symbols for specs."""
        return self.observe if model == FAMILY else ("chain",)

    def axes(self) -> dict[str, Sequence]:
        return {
            "model": self.models,
            "chains": self.chains,
            "n_states": self.n_states,
            "eps": self.eps,
            "seed": self.seeds,
            "observe": self.observe,
            "p": tuple(float(p) for p in self.settings.topp),
            "t": range(self.settings.horizon + 1),
        }

    def cells(self) -> list[CoupledCell]:
        """Every cell, the largest joint chains first (they take longest)."""
        cells = [
            CoupledCell(m, k, n, e, s, o)
            for m in self.models
            for k, n in self.shapes[m]
            for e in self.eps
            for s in self.seeds
            for o in self.observed(m)
        ]
        return sorted(cells, key=lambda c: -(c.n_states**c.chains))

    def identity(self) -> dict:
        return {
            "kind": SCHEMA.name,
            "shapes": {m: [list(p) for p in pairs] for m, pairs in self.shapes.items()},
            "domains": sorted([*key, value] for key, value in self.domains.items()),
            "eps": self.eps,
            "seeds": self.seeds,
            "observe": self.observe,
            **dataclasses.asdict(self.settings),
        }


def grid(cfg) -> CoupledGrid:
    """The grid of a validated config."""
    section = as_dict(cfg.coupled, resolve=True)
    chains = sorted(section.pop("chains"))
    sizes = section.pop("n_states")
    shapes = {FAMILY: tuple((k, n) for k in chains for n in sorted(chain_sizes(sizes, k)))}
    domains = {}
    for name, entries in section.pop("relational").items():
        pairs = []
        for counts in entries:
            domain = json.dumps(counts, sort_keys=True)
            model = grounded(name, domain, 0.0).model
            pair = (model.chains, model.sizes[0])
            pairs.append(pair)
            domains[(name, *pair)] = domain
        shapes[name] = tuple(sorted(pairs))
    return CoupledGrid(
        models=tuple(shapes),
        shapes=shapes,
        domains=domains,
        eps=tuple(sorted(float(e) for e in section.pop("eps"))),
        seeds=tuple(sorted(section.pop("seeds"))),
        observe=tuple(section.pop("observe")),
        settings=Settings(**section | {"topp": tuple(section["topp"])}),
    )


def chain_sizes(sizes, chains: int) -> list[int]:
    """The per-chain sizes of ``chains`` chains: a list for every chain count, or a mapping."""
    return sizes if isinstance(sizes, list) else sizes.get(chains, sizes.get(str(chains), []))
