"""The sweep's structured config: the ``SweepConfig`` schema Hydra composes
``conf/config.yaml`` over, the engine's keys and those of every installed kind
(``sweep_config``: each kind's ``CONFIG``, ``pipeline.kinds.<kind>.config``). OmegaConf
checks types and rejects unknown keys; the numbers' ranges are declared on the fields,
``ranged``, and checked by ``validation.check_ranges``; the kinds check the rest.

Its namesake ``pipeline.results.schema`` is the schema of a sweep's store; this one is the
schema of its config.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, Optional

import yaml
from omegaconf import MISSING

from pipeline.results.registry import KINDS
from pipeline.sweep.config.moved import MOVED
from pipeline.sweep.config.validation import choices, optional, ranged
from pipeline.sweep.kind import installed


def _shipped() -> Path:
    """The folder holding the configs the project ships, ``conf/`` and ``dask_cluster.yaml``:
    the package's own folder where it is installed from a wheel (the build copies them there,
    ``setup.py``), else the repository's top level (a checkout, installed editable or not)."""
    package = Path(__file__).resolve().parents[2]
    return package if (package / "conf" / "config.yaml").is_file() else package.parent


_SHIPPED = _shipped()
CONFIG_DIR = _SHIPPED / "conf"
"""Hydra's config folder as the project ships it (``conf/``): ``config.yaml``, the experiments
and the relational specs."""
SHIPPED_CLUSTERS = _SHIPPED / "dask_cluster.yaml"
"""The cluster entries the project ships (``dask_cluster.yaml``); one in the working directory
replaces them (``clusters.cluster_file``)."""


def group_defaults() -> dict[str, str]:
    """The config groups' defaults of Hydra's ``config.yaml``: group -> the option it picks
    when the command line names none (``cluster`` -> ``local``)."""
    config = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text())
    return {
        group: option
        for entry in config["defaults"]
        if isinstance(entry, dict)
        for group, option in entry.items()
    }


def _cluster_names() -> str:
    names = ", ".join(yaml.safe_load(SHIPPED_CLUSTERS.read_text()))
    return f"an entry of dask_cluster.yaml (the package's: {names}; or one of your own)"


@functools.cache
def sweep_config() -> type:
    """``SweepConfig`` with every installed kind's section (the built-ins' and plug-ins'),
    typed by its ``CONFIG`` dataclass and null unless the config's ``kind`` is that kind.
    Made once, when the schema is first needed (a plug-in kind is imported then)."""
    sections = []
    for name, kind in installed().items():
        doc = f"The settings of a ``kind={name}`` sweep (null for any other kind)."
        section = optional(kind.CONFIG | None)
        sections.append((kind.SECTION, section, field(default=None, metadata={"doc": doc})))
    return make_dataclass("SweepConfig", sections, bases=(SweepConfig,))


@functools.cache
def accepting() -> type:
    """The schema Hydra composes with: ``sweep_config`` and the methods kind's top-level keys
    of the old layout (``moved.MOVED``), untyped and null, so that a config file of that
    layout composes; ``moved.normalise`` moves them into the section."""
    old = [(key, Any, field(default=None)) for key in MOVED]
    return make_dataclass("SweepConfig", old, bases=(sweep_config(),))


@dataclass
class SweepConfig:
    """The keys of every sweep, whatever its kind; Hydra's ``config.yaml`` fills them in.
    Each kind adds its own settings (``sweep_config``)."""

    kind: str = choices("methods", KINDS.names)
    """The kind of sweep (``pipeline.results.registry.KINDS``), chosen as a config group
    (``kind=training``): ``methods`` (approximations against exact inference), ``training``,
    ``coupled``, ``kernel_features``, ``learning``, or a plug-in's. Each kind reads its own
    section, named like it (``methods.grid``), which choosing the kind fills with its
    defaults; the experiments of a kind choose it."""
    cluster: Any = choices(MISSING, _cluster_names)
    """Where the work runs: an entry of ``dask_cluster.yaml`` (``cluster=local``, the
    default; ``machine``, ``address``, ``slurm``, ``pbs``, ``ssh``)."""
    store: Optional[str] = choices(None, "a folder's path, or null")  # noqa: UP045
    """The results store's path (default ``outputs/<experiment>/results.zarr``)."""
    overwrite: bool = False
    """Replace a store of another sweep (another grid, an older layout) instead of refusing
    it. Never deletes the finished cells of this same sweep (a store this run resumes or
    grows): refused while there are any; a rerun without it repairs a damaged store, keeping
    every chunk that verifies."""
    performance_report: bool = False
    """Save Dask's performance report of the computation (HTML: task stream, worker profile,
    bandwidth) beside the store, as ``<store name>_performance.html``."""
    retries: int = ranged(2, least=0)
    """How often a task is tried again after a reason another attempt may not meet (a worker
    short of memory, a lost connection, workers that died under it) before its cells are
    marked failed; a task's own exception (a ``ValueError`` of a plug-in) is never retried:
    it would be the same (``pipeline.sweep.failures``)."""
    max_cells: int = ranged(100_000, least=1)
    """The most cells a grid may have; a larger one is refused before anything starts (a
    typo, an extra zero in a list of seeds, should not start a week of work)."""
    flush_seconds: float = ranged(2.0, least=0, above=True)
    """Finished cells are written to the store at least this often."""
    progress_seconds: float = ranged(10.0, least=0, above=True)
    """Interval of the plain progress lines printed when stderr is not a terminal."""
