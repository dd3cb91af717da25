"""Sweep kinds, one module each with the ``SweepKind`` interface (``kinds.base``):

- ``methods`` (the default): approximation methods against exact inference over ``grid``;
- ``training``: HMM language models trained over a ``training`` section;
- ``coupled``: inference in weakly coupled HMMs over a ``coupled`` section;
- ``kernel_features``: random features against the softmax over a ``kernel_features`` section;

and those installed packages add, every one found through ``pipeline.results.KINDS``. A
config names its kind (``kind=...``); ``for_config`` finds it, ``validate`` checks the
config for it.
"""

from __future__ import annotations

import functools
import warnings

from pipeline.results.kinds import KINDS
from pipeline.sweep.config import ConfigError
from pipeline.sweep.config.clusters import validate_cluster
from pipeline.sweep.config.schema import sweep_config
from pipeline.sweep.config.validation import check_ranges
from pipeline.sweep.kinds.base import Grid, SweepKind


@functools.cache
def installed() -> dict[str, SweepKind]:
    """Kind name -> its sweep module, for every kind whose modules import: the built-ins, then
    plug-ins (one that fails to import only warns, until a config names it)."""
    found = {}
    for name, kind in KINDS.items():
        try:
            found[name] = kind.load("sweep")
        except Exception as error:  # any failure of a plug-in's import is reported alike
            warnings.warn(f"sweep kind {name!r}: {error}", RuntimeWarning, stacklevel=2)
    return found


def for_config(cfg) -> SweepKind:
    """The sweep module of the kind ``cfg`` names (``kind``); ``ConfigError`` for a kind
    nothing registers, and for a section of another kind set beside it."""
    try:
        kind = KINDS.lookup(cfg.kind).load("sweep")
    except ValueError as error:  # unknown, or a plug-in that cannot be used
        raise ConfigError("kind", str(error)) from None
    except ImportError as error:
        raise ConfigError("kind", f"{cfg.kind!r} cannot be used: {error}") from None
    for name, other in installed().items():
        if name != cfg.kind and other.SECTION and cfg.get(other.SECTION) is not None:
            raise ConfigError(
                other.SECTION, f"is set but kind={cfg.kind}; allowed: kind={name} with this section"
            )
    if kind.SECTION and cfg.get(kind.SECTION) is None:
        raise ConfigError(kind.SECTION, f"is not set; kind={cfg.kind} reads its settings there")
    return kind


def validate(cfg) -> SweepKind:
    """Raise ``ConfigError`` naming the first invalid key of a composed config; return the
    config's kind."""
    kind = for_config(cfg)
    check_ranges(cfg, sweep_config())
    kind.validate(cfg)
    validate_cluster(cfg.cluster)
    return kind


__all__ = ["Grid", "SweepKind", "for_config", "installed", "validate"]
