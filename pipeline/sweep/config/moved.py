"""The methods kind's keys of the old layout, when they sat at the top level of the config
(``grid``, ``model``, ``timing``, ``fuse_states``, ``exact_max_states``,
``gamma_exact_max_states``), before the kind had its section ``methods``.

An old key is still accepted, with one line on stderr naming its new place (``grid.modes is
deprecated: use methods.grid.modes``), and moved there once, where a config enters:
an override (``grid.seeds=[0]``) before Hydra composes (``moved_overrides``), a config file
of the old layout after (``normalise``; the schema Hydra composes with, ``schema.accepting``,
holds the old keys untyped for it). A config that sets a key at both places is refused in
one line. A store's config of the old layout reads in the new one
(``pipeline.results.config``).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from pipeline.results.config import MOVED, SECTION
from pipeline.sweep.config.errors import ConfigError

_announced: set[str] = set()
"""The old keys already announced in this process: a config is composed more than once (its
check, then Hydra's run), and each old key gets one line."""


def _announce(old: str) -> None:
    if old not in _announced:
        _announced.add(old)
        print(f"{old} is deprecated: use {SECTION}.{old}", file=sys.stderr)


def _overlap(one: str, other: str) -> bool:
    """Whether two dotted keys name the same value, or one holds the other."""
    return one == other or one.startswith(f"{other}.") or other.startswith(f"{one}.")


def _both(old: str) -> ConfigError:
    return ConfigError(
        old,
        f"is set at its old place and at its new one, {SECTION}.{old}; allowed: "
        f"{SECTION}.{old} alone (the top-level {old} is deprecated)",
    )


def _key(override: str) -> tuple[str, str]:
    """An override's prefix (``+``, ``++``, ``~``) and its dotted key."""
    key = override.partition("=")[0]
    bare = key.lstrip("+~")
    return key[: len(key) - len(bare)], bare


def moved_overrides(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with every key of the old layout moved to its place in the section
    (``grid.seeds=[0]`` -> ``methods.grid.seeds=[0]``), each announced once;
    ``ConfigError`` where a key is given at both places."""
    given = [key for _, key in map(_key, overrides) if key.startswith(f"{SECTION}.")]
    out = []
    for override in overrides:
        prefix, key = _key(override)
        if key.partition(".")[0] not in MOVED:
            out.append(override)
            continue
        new = f"{SECTION}.{key}"
        if any(_overlap(new, other) for other in given):
            raise _both(key)
        _announce(key)
        out.append(f"{prefix}{new}{override[len(prefix) + len(key) :]}")
    return out


def _leaves(old: Any, default: Any, key: str) -> Iterator[tuple[str, Any]]:
    """The values of ``old`` (a plain value of the old layout at ``key``) by the dotted keys
    the section types one by one: into its dataclass sections, not into a mapping it takes
    whole (``grid.methods``)."""
    typed = isinstance(default, DictConfig) and dataclasses.is_dataclass(
        OmegaConf.get_type(default)
    )
    if isinstance(old, dict) and typed:
        for name, value in old.items():
            inner = default.get(name) if name in default else None
            yield from _leaves(value, inner, f"{key}.{name}")
    else:
        yield key, old


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def normalise(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Move what a config file of the old layout set at the top level of ``cfg`` into the
    section, each old key announced once, and drop the old keys. A value an override set in
    the section (``overrides``, already moved) stays: it came later. ``ConfigError`` where
    the file sets a key whose new place holds another value than its default, and where it
    sets keys of a kind the config does not choose."""
    present = [key for key in MOVED if cfg.get(key) is not None]
    section = cfg.get(SECTION)
    if present and section is None:
        raise ConfigError(
            present[0],
            f"is a key of kind={SECTION} (now {SECTION}.{present[0]}), which this config does "
            f"not choose; allowed: kind={SECTION} with it",
        )
    given = [key for _, key in map(_key, overrides)]
    if present:
        defaults = OmegaConf.structured(OmegaConf.get_type(section))
    for key in present:
        _announce(key)
        for leaf, value in _leaves(_plain(cfg[key]), defaults.get(key), key):
            new = f"{SECTION}.{leaf}"
            if any(_overlap(new, other) for other in given):
                continue
            current = _plain(OmegaConf.select(cfg, new))
            if current not in (value, _plain(OmegaConf.select(defaults, leaf))):
                raise _both(leaf)
            try:
                OmegaConf.update(cfg, new, value, merge=False)
            except OmegaConfBaseException as error:
                raise ConfigError(leaf, str(error).strip().splitlines()[0]) from None
    with open_dict(cfg):
        for key in MOVED:
            cfg.pop(key, None)
