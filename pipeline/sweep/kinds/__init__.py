"""Sweep kinds, one module each with the ``SweepKind`` interface (``kinds.base``):

- ``methods`` (the default): approximation methods against exact inference over ``grid``;
- ``training``: HMM language models trained over a ``training`` section;
- ``coupled``: inference in weakly coupled HMMs over a ``coupled`` section;
- ``kernel_features``: random features against the softmax over a ``kernel_features`` section.

``KINDS`` is keyed by the store's ``kind`` attribute; ``for_config`` picks a composed
config's kind by the section it sets, and ``validate`` checks the config for it.
"""

from __future__ import annotations

from pipeline.sweep.config import ConfigError
from pipeline.sweep.config.clusters import validate_cluster
from pipeline.sweep.config.validation import validate_shared
from pipeline.sweep.kinds import coupled, kernel_features, methods, training
from pipeline.sweep.kinds.base import Grid, SweepKind

KINDS: dict[str, SweepKind] = {
    kind.SCHEMA.name: kind for kind in (methods, training, coupled, kernel_features)
}
"""Sweep kind name (a store's ``kind`` attribute) -> its module."""


def for_config(cfg) -> SweepKind:
    """The kind whose section ``cfg`` sets (``training``, ``coupled``, ``kernel_features``),
    else the default."""
    chosen = [kind for kind in KINDS.values() if kind.SECTION and cfg.get(kind.SECTION)]
    if len(chosen) > 1:
        sections = " and ".join(kind.SECTION for kind in chosen)
        raise ConfigError(
            chosen[-1].SECTION, f"a sweep sets one section of {sections}, not several"
        )
    return chosen[0] if chosen else next(k for k in KINDS.values() if k.SECTION is None)


def validate(cfg) -> SweepKind:
    """Raise ``ConfigError`` naming the first invalid key of a composed config; return the
    config's kind."""
    kind = for_config(cfg)
    kind.validate(cfg)
    validate_shared(cfg)
    validate_cluster(cfg.cluster)
    return kind


__all__ = ["KINDS", "Grid", "SweepKind", "for_config", "validate"]
