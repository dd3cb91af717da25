"""The relational specs of ``conf/relational``: YAML files a coupled sweep grounds
(``pipeline.coupled.relational`` reads a spec as a mapping; this is where files are read),
and a spec grounded at a domain (``grounded``)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import yaml

from pipeline.coupled import relational
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


@functools.cache
def grounded(name: str, domain: str, eps: float):
    """The relational spec ``name`` grounded at ``domain`` (JSON of type -> constants kept)
    with coupling ``eps``; once per worker process."""
    spec = load_spec(name)
    counts = json.loads(domain)
    types = spec["types"]
    for kind, count in counts.items():
        if kind not in types:
            raise ValueError(f"unknown type {kind!r} in a domain; allowed: {', '.join(types)}")
        if (
            isinstance(count, bool)
            or not isinstance(count, int)
            or not 1 <= count <= len(types[kind])
        ):
            raise ValueError(
                f"a domain keeps {count!r} constants of {kind}; allowed: 1 to {len(types[kind])}"
            )
    return relational.ground(
        spec, eps=eps, domain={t: list(types[t])[:c] for t, c in counts.items()}
    )
