"""The relational specs of ``conf/relational``: YAML files a coupled sweep grounds
(``pipeline.coupled.relational`` reads a spec as a mapping; this is where files are read)."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from pipeline.sweep.config.schema import CONFIG_DIR

SPECS = CONFIG_DIR / "relational"


def spec_path(name: str) -> Path:
    """The file of the relational spec ``name``: ``conf/relational/<name>.yaml``."""
    return SPECS / f"{name}.yaml"


def known_specs() -> list[str]:
    """The names of every spec in ``conf/relational``."""
    return sorted(path.stem for path in SPECS.glob("*.yaml"))


@functools.cache
def load_spec(name: str) -> dict:
    """The spec ``name`` as a mapping; ``ValueError`` (one line) if its file is not one."""
    path = spec_path(name)
    spec = yaml.safe_load(path.read_text())
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: a spec must be a YAML mapping")
    return spec
