"""The learning sweep: EM whose E-step is top-p or top-k on the transitions, or a low-rank
transition, against exact EM, from the same start on the same data (issue 42,
``pipeline.learning``).

A config with a ``learning`` section (``experiment=learning``, ``learning_smoke``) makes one
problem per ``(family, n_states, seed, sequences, length)`` and one cell per problem and
``(method, setting)`` (``grid``). A problem's exact EM is one Dask task
(``tasks.reference_task``) whose result every cell of the problem reads
(``tasks.learning_cell``), so exact EM runs once per problem however many cells it has. The
store keeps what ``results`` lists. This module is the kind's
``pipeline.sweep.kind.SweepKind``: it checks the section and submits the cells.
"""

from __future__ import annotations

from pathlib import Path

from dask import delayed
from distributed import Client, Future
from omegaconf import OmegaConf

from pipeline.kinds.learning import results
from pipeline.kinds.learning.config import METHODS, LearningConfig
from pipeline.kinds.learning.grid import LearningCell, LearningGrid, grid
from pipeline.kinds.learning.tasks import learning_cell, reference_task
from pipeline.methods import check_setting
from pipeline.models import FAMILIES, ParameterError, check_model
from pipeline.sweep.config import check_list
from pipeline.sweep.config.errors import ConfigError

SCHEMA = results.SCHEMA
SECTION = "learning"
CONFIG = LearningConfig
summary = results.summary

__all__ = ["CONFIG", "SCHEMA", "SECTION", "grid", "submit", "summary", "validate"]


def _mapping(key: str, node, allowed: str) -> dict:
    """``node`` as a non-empty mapping of names to lists; ``ConfigError`` at ``key``."""
    plain = OmegaConf.to_container(node) if OmegaConf.is_config(node) else node
    if (
        not isinstance(plain, dict)
        or not plain
        or not all(isinstance(v, list) for v in plain.values())
    ):
        raise ConfigError(key, f"must be a non-empty mapping; allowed: {allowed}")
    return plain


def _validate_families(section) -> None:
    allowed = ", ".join(FAMILIES)
    families = _mapping("learning.families", section.families, f"families ({allowed}) -> sizes")
    for name, sizes in families.items():
        if name not in FAMILIES:
            raise ConfigError("learning.families", f"{name!r} is not allowed; allowed: {allowed}")
        key = f"learning.families.{name}"
        check_list(key, sizes, int, "integers >= 2")
        for n in sizes:
            try:
                check_model(name, n)
            except ParameterError as error:
                raise ConfigError(key, str(error)) from None


def _validate_methods(section) -> None:
    allowed = ", ".join(METHODS)
    methods = _mapping("learning.methods", section.methods, f"methods ({allowed}) -> settings")
    for name, settings in methods.items():
        if name not in METHODS:
            raise ConfigError(
                "learning.methods",
                f"{name!r} is not allowed; allowed: {allowed} (the paper's topp and topk "
                "truncate the emissions and cannot score every training sequence: use "
                "topp_transitions or topk_transitions)",
            )
        key = f"learning.methods.{name}"
        check_list(key, settings, int | float, "numbers")
        for setting in settings:
            try:
                check_setting(name, setting)
            except ValueError as error:
                raise ConfigError(key, f"{setting!r} is not allowed; {error}") from None


def validate(cfg) -> None:
    """Raise ``ConfigError`` naming the first invalid key of ``learning``."""
    section = cfg.learning
    _validate_families(section)
    for key in ("seeds", "sequences", "length"):
        check_list(f"learning.{key}", section[key], int, "integers")
    _validate_methods(section)


def submit(
    client: Client, grid: LearningGrid, cells: list[LearningCell], *, store: Path
) -> dict[Future, list[LearningCell]]:
    """One exact-EM task per problem of ``cells`` and one task per cell that reads it; the
    future of each cell's task and the cell it computes."""
    references = {}
    tasks = []
    for cell in cells:
        key = cell.problem
        if key not in references:
            name = f"learning-reference-{'-'.join(map(str, key))}"
            references[key] = delayed(reference_task)(key, grid.settings, dask_key_name=name)
        name = f"learning-{'-'.join(map(str, cell))}"
        tasks.append(
            delayed(learning_cell)(cell, references[key], grid.settings, dask_key_name=name)
        )
    futures = client.compute(tasks)
    return {future: [cell] for future, cell in zip(futures, cells, strict=True)}
