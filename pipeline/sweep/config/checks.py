"""A composed config checked whole: a config names its kind (``kind=...``, any of
``pipeline.results.registry.KINDS``); ``for_config`` finds its sweep, ``validate`` checks every key
for it (the ranges the schema declares, the kind's own checks, the cluster's)."""

from __future__ import annotations

from pipeline.results.registry import KINDS
from pipeline.sweep.config.clusters import validate_cluster
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.schema import sweep_config
from pipeline.sweep.config.validation import check_ranges
from pipeline.sweep.kind import Sweep, installed, load


def for_config(cfg) -> Sweep:
    """The ``Sweep`` of the kind ``cfg`` names (``kind``); ``ConfigError`` for a kind
    nothing registers, and for a section of another kind set beside it."""
    try:
        kind = load(KINDS.lookup(cfg.kind))
    except ValueError as error:  # unknown, or a plug-in that cannot be used
        raise ConfigError("kind", str(error)) from None
    except ImportError as error:
        raise ConfigError("kind", f"{cfg.kind!r} cannot be used: {error}") from None
    for name, other in installed().items():
        if name != cfg.kind and cfg.get(other.SECTION) is not None:
            raise ConfigError(
                other.SECTION, f"is set but kind={cfg.kind}; allowed: kind={name} with this section"
            )
    if cfg.get(kind.SECTION) is None:
        raise ConfigError(kind.SECTION, f"is not set; kind={cfg.kind} reads its settings there")
    return kind


def validate(cfg) -> Sweep:
    """Raise ``ConfigError`` naming the first invalid key of a composed config; return the
    config's kind."""
    kind = for_config(cfg)
    check_ranges(cfg, sweep_config())
    kind.validate(cfg)
    validate_cluster(cfg.cluster)
    return kind
