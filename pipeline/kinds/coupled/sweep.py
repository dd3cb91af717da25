"""The coupled sweep: structured mean field and chain-wise Viterbi against exact inference
and top-p in weakly coupled HMMs (Thon and Kersting, *Distributed Relational State
Representations for Complex Stochastic Processes*).

A config with a ``coupled`` section (``experiment=coupled``, ``coupled_smoke``) computes one
cell per ``(model, chains, n_states, eps, seed, observe)`` (``grid``) as a Dask task
(``tasks.coupled_cell``): ``model`` is the ``coupled`` family (seeded mixed-memory chains)
or a relational spec of ``conf/relational`` grounded at a domain (``specs``); ``eps`` is
the coupling; ``observe`` what is observed. Each cell samples a path of the model, observes
every ``observe_every`` steps and runs every method on it (``tasks.compare``); the store
keeps what ``results`` lists. This module is the kind's ``pipeline.sweep.kind.SweepKind``:
it checks the section and submits the cells.
"""

from __future__ import annotations

import itertools
import json
from math import isqrt
from pathlib import Path

from distributed import Client, Future
from omegaconf import OmegaConf

from pipeline.coupled import family
from pipeline.coupled.model import OBSERVE
from pipeline.kinds.coupled import results
from pipeline.kinds.coupled.config import CoupledConfig
from pipeline.kinds.coupled.grid import CoupledCell, CoupledGrid, chain_sizes, grid
from pipeline.kinds.coupled.specs import grounded, known_specs, spec_path
from pipeline.kinds.coupled.tasks import coupled_cell
from pipeline.models import ParameterError
from pipeline.operators.lowrank import MAX_DENSE
from pipeline.sweep.config import as_dict, check_list
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.kind import submit_each

SCHEMA = results.SCHEMA
SECTION = "coupled"
CONFIG = CoupledConfig
summary = results.summary

__all__ = ["CONFIG", "SCHEMA", "SECTION", "grid", "submit", "summary", "validate"]

EXACT_MAX_STATES = isqrt(MAX_DENSE)
"""The most joint states ``exact_max_states`` allows: exact Viterbi and top-p on the joint
chain hold its matrix (``pipeline.operators.lowrank.MAX_DENSE`` entries)."""


def validate(cfg) -> None:
    """Raise ``ConfigError`` naming the first invalid key of ``coupled``."""
    section = cfg.coupled
    check_list("coupled.chains", section.chains, int, "integers >= 2")
    if section.n_states is None:
        raise ConfigError(
            "coupled.n_states",
            "must be set; allowed: a list of integers >= 2, or a mapping chains -> such a list",
        )
    sizes = OmegaConf.to_container(section.n_states)
    check_list("coupled.eps", section.eps, float | int, "numbers in [0, 1]")
    check_list("coupled.seeds", section.seeds, int, "integers >= 0")
    check_list("coupled.observe", section.observe, str, ", ".join(OBSERVE))
    extra = (
        sorted(set(map(str, sizes)) - set(map(str, section.chains)))
        if isinstance(sizes, dict)
        else []
    )
    if extra:
        raise ConfigError(
            f"coupled.n_states.{extra[0]}",
            f"{extra[0]} chains are not in coupled.chains; allowed: {list(section.chains)}",
        )
    for k in section.chains:
        key = f"coupled.n_states.{k}" if isinstance(sizes, dict) else "coupled.n_states"
        check_list(key, chain_sizes(sizes, k), int, "integers >= 2")
        for n, e, o in itertools.product(chain_sizes(sizes, k), section.eps, section.observe):
            try:
                family.check(
                    k,
                    n,
                    eps=e,
                    n_observations=section.n_observations,
                    observe=o,
                    alpha=section.alpha,
                )
            except ParameterError as error:
                raise ConfigError(f"coupled.{error.parameter}", str(error)) from None
    check_list("coupled.topp", section.topp, float | int, "numbers in (0, 1]")
    if section.exact_max_states > EXACT_MAX_STATES:
        raise ConfigError(
            "coupled.exact_max_states",
            f"{section.exact_max_states} is not allowed; allowed: 1 to {EXACT_MAX_STATES} (exact "
            "Viterbi and top-p on the joint chain hold its n_joint^2 matrix)",
        )
    relational = as_dict(section.relational)
    if relational and "chain" not in section.observe:
        raise ConfigError(
            "coupled.observe",
            f"{list(section.observe)} has no chain; relational specs observe every chain's "
            "symbol: allowed: a list with chain",
        )
    for name, domains in relational.items():
        key = f"coupled.relational.{name}"
        if not spec_path(name).is_file():
            raise ConfigError(key, f"no such spec; allowed: {', '.join(known_specs())}")
        if not isinstance(domains, list) or not domains:
            raise ConfigError(key, "must be a non-empty list of domains (type -> constants kept)")
        shapes = set()
        for counts in domains:
            if not isinstance(counts, dict):
                raise ConfigError(
                    key, f"the domain {counts!r} is not allowed; allowed: a mapping type -> count"
                )
            try:
                model = grounded(name, json.dumps(counts, sort_keys=True), 0.0).model
            except (ValueError, TypeError, KeyError) as error:
                raise ConfigError(key, str(error).splitlines()[0]) from None
            sizes = model.sizes
            if len(sizes) < 2 or model.observe != "chain":
                raise ConfigError(
                    key,
                    f"the domain {counts} grounds to {len(sizes)} chain(s) observing "
                    f"{model.observe}; allowed: at least 2 chains, every chain's symbol observed",
                )
            if (len(sizes), sizes[0]) in shapes or len(set(sizes)) > 1:
                raise ConfigError(
                    key,
                    f"the domain {counts} grounds to chains of {sizes} states, already in the "
                    "grid or unequal; allowed: one domain per (chains, n_states), every chain "
                    "the same size",
                )
            shapes.add((len(sizes), sizes[0]))


def submit(
    client: Client, grid: CoupledGrid, cells: list[CoupledCell], *, store: Path
) -> dict[Future, list[CoupledCell]]:
    """One task per cell; the future of each and the cells it computes."""
    return submit_each(
        client,
        coupled_cell,
        cells,
        grid.domains,
        grid.settings,
        prefix="coupled",
    )
