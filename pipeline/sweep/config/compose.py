"""Hydra's side of the config: the schema and clusters registered, overrides made to replace
what they name, and composition (the command line's, or Python's) with one-line errors."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from pipeline.models import BUILTIN as BUILTIN_FAMILIES
from pipeline.models import FAMILIES
from pipeline.results.config import SECTION
from pipeline.sweep.config.clusters import load_clusters
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.moved import MOVED, moved_overrides, normalise
from pipeline.sweep.config.schema import CONFIG_DIR, accepting
from pipeline.sweep.config.validation import check_keys, unknown_key
from pipeline.sweep.kind import installed

VERSION_BASE = "1.3"

REPLACED = ("methods.grid.n_states", "methods.grid.methods", "coupled.n_states")
"""Keys whose override replaces the experiment's value instead of merging into it."""


class OverrideError(ConfigError):
    """Overrides that Hydra cannot compose; the message is the whole line."""

    def __init__(self, line: str):
        ValueError.__init__(self, line)
        self.key = "overrides"


def register(clusters: dict[str, object] | None = None) -> None:
    """Store the schema, every sweep kind and every cluster definition in Hydra's ConfigStore.

    ``kind`` is a config group: ``kind=training`` sets the key and the kind's section to its
    defaults (OmegaConf cannot set keys inside a section that is null), so
    ``training.max_epochs=3`` applies to it. The schema accepts the methods kind's keys of
    the old layout (``moved``)."""
    store = ConfigStore.instance()
    store.store(name="sweep_schema", node=accepting())
    for name, kind in installed().items():
        node = {"kind": name, kind.SECTION: {}}
        store.store(group="kind", name=name, node=node, package="_global_")
    for name, entry in (clusters if clusters is not None else load_clusters()).items():
        store.store(group="cluster", name=name, node=entry)


USER_CONFIG = "PIPELINE_CONFIG_DIR"
"""The environment variable naming a folder of the user's own configs."""


def user_configs() -> list[Path]:
    """Folders of the user's own configs, searched beside the project's (``experiment=mine``
    finds ``<folder>/experiment/mine.yaml``): ``$PIPELINE_CONFIG_DIR`` and the working
    directory's ``conf/``, each where it exists and once, and neither where it is the
    project's own ``CONFIG_DIR`` (the working directory's ``conf/`` at the repository's top
    level)."""
    found = [os.environ.get(USER_CONFIG), "conf"]
    folders = dict.fromkeys(Path(f).resolve() for f in found if f and Path(f).is_dir())
    return [folder for folder in folders if folder != CONFIG_DIR]


def replaceable(overrides: list[str]) -> list[str]:
    """Overrides as Hydra takes them: keys of the old layout moved into the methods section
    (``moved.moved_overrides``), mappings that replace, and the user's config folders on
    Hydra's search path (``user_configs``).

    A plug-in family's parameters (``methods.model.ring.reach=5``) are added to its section, which
    holds only what is set (``schema.model_config``: the plug-in is not imported to list
    them). Hydra merges an override into the node it replaces: ``methods.grid.methods={topk:
    [5]}`` would add top-k to the experiment's methods, and OmegaConf cannot merge a
    mapping into a list (``methods.grid.n_states``). Setting the node to null first
    replaces it; the null is spelled ``++key=null``, a key of its own to Hydra's basic
    sweeper, which keeps one override per key and would drop a ``key=null`` before
    ``key=...`` from every job of a multirun.
    """
    overrides = moved_overrides(overrides)
    keys = {override.partition("=")[0] for override in overrides}
    plugins = {
        f"methods.model.{family}" for family in FAMILIES.names() if family not in BUILTIN_FAMILIES
    }
    out = []
    for override in overrides:
        key, _, value = override.partition("=")
        if value != "null" and key in REPLACED:
            out.append(f"++{key}=null")
        if key.rpartition(".")[0] in plugins:  # a plug-in's parameter: added, or replaced
            override = f"++{override}"
        out.append(override)
    folders = user_configs()
    if folders and "hydra.searchpath" not in keys:
        out.append(f"hydra.searchpath=[{','.join(f'file://{f}' for f in folders)}]")
    return out


DEFAULT_EXPERIMENT = "default"
"""The experiment of a config that names none (``conf/config.yaml``): the methods kind's
default sweep, whose ``methods`` section a config of another kind (``kind=training`` alone)
does not keep."""


def without_default_sweep(cfg: DictConfig, experiment: str, overrides: Sequence[str]) -> None:
    """Drop the methods section the default experiment (``DEFAULT_EXPERIMENT``) put in a
    config of another kind (``kind=training`` alone), unless an override set a key of it
    (then the kind's check refuses it in one line). Both ways a config is composed call
    this: ``compose`` and the command line's run (``pipeline.sweep.main.run``)."""
    sets = any(o.partition("=")[0].lstrip("+~").startswith(f"{SECTION}.") for o in overrides)
    if experiment == DEFAULT_EXPERIMENT and cfg.kind != SECTION and not sets:
        with open_dict(cfg):
            cfg[SECTION] = None


def _composition_error(error: Exception) -> str:
    """A one-line description of why Hydra could not compose the overrides.

    What is allowed comes from Hydra and OmegaConf themselves: the options of
    a config group from Hydra's config repository, the keys from the schema.
    """
    if isinstance(error, OverrideParseException):
        return f"cannot parse the override {error.override!r}: {str(error).splitlines()[0]}"
    if isinstance(error, MissingConfigException) and error.missing_cfg_file and error.options:
        group, _, option = error.missing_cfg_file.rpartition("/")
        return f"{group}={option}: no such {group}; allowed: {', '.join(error.options)}"
    cause = error.__cause__
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None) or "config"
        schema = getattr(cause, "object_type", None)
        if isinstance(cause, ConfigKeyError | ConfigAttributeError) and is_dataclass(schema):
            old = MOVED if schema is accepting() else ()  # accepted, but not to be offered
            return str(unknown_key(key, [f.name for f in fields(schema) if f.name not in old]))
        return f"{key}: {str(cause).strip().splitlines()[0]}"
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return f"the overrides do not compose ({type(error).__name__})"
    return " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def _null_section(overrides: list[str]) -> str | None:
    """The override that sets a key in the section of a kind the config did not choose
    (that section is null), as one line; None if there is none."""
    sections = {kind.SECTION: name for name, kind in installed().items()}
    chosen = {o.partition("=")[2] for o in overrides if o.lstrip("+~").startswith("kind=")}
    for override in overrides:
        key = override.partition("=")[0].lstrip("+~")
        owner = sections.get(key.partition(".")[0])
        if owner is not None and owner not in chosen:
            return (
                f"{key}: is a key of kind={owner}, which this config does not choose; "
                f"allowed: kind={owner} (or an experiment of that kind) with it"
            )
    return None


def compose(
    overrides: list[str], *, clusters: dict[str, object] | None = None
) -> tuple[DictConfig, str]:
    """The config ``python -m pipeline.sweep <overrides>`` runs, composed by Hydra's compose
    API from ``CONFIG_DIR`` with the same replacements (``replaceable``), and the experiment's
    name (a store's default path holds it); ``OverrideError`` (one line) where the
    overrides do not compose, ``ConfigError`` where they add a key the schema does not
    declare (``check_keys``) or set a key of the old layout and its new place (``moved``).
    ``clusters``: the ``cluster`` group's options (default ``dask_cluster.yaml``'s).
    """
    register(clusters)
    replaced = replaceable(overrides)
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=VERSION_BASE):
            cfg = hydra_compose("config", overrides=replaced, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException, ValueError) as error:
        raise OverrideError(_composition_error(error)) from None
    except (AssertionError, AttributeError):  # OmegaConf setting a key inside a null node
        problem = _null_section(replaced)
        if problem is None:
            raise
        raise OverrideError(problem) from None
    experiment = cfg.hydra.runtime.choices["experiment"]
    with open_dict(cfg):
        cfg.pop("hydra")
    without_default_sweep(cfg, experiment, replaced)
    normalise(cfg, replaced)
    check_keys(cfg)
    return cfg, experiment


def compose_with_hydra(overrides: list[str], *, job_name: str) -> DictConfig:
    """The config of ``overrides`` with Hydra's own section, as ``--cfg hydra`` and ``--cfg
    all`` show it (``job_name``: Hydra's name of the job); ``${hydra:...}`` resolves in it.
    For overrides ``compose`` has composed."""
    with initialize_config_dir(
        config_dir=str(CONFIG_DIR), version_base=VERSION_BASE, job_name=job_name
    ):
        cfg = hydra_compose("config", overrides=replaceable(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)  # for ${hydra:...}
    OmegaConf.set_readonly(cfg.hydra, None)
    return cfg


def sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """The overrides of each job of a multirun of ``overrides``: every combination of their
    swept values (``a=1,2 b=3,4``: four jobs), as Hydra's basic sweeper makes them;
    ``OverrideError`` (one line) for an override it cannot sweep."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        (jobs,) = BasicSweeper.split_arguments(parsed, max_batch_size=None)
    except HydraException as error:
        raise OverrideError(_composition_error(error)) from None
    return jobs
