"""The config a store keeps (its ``config`` attribute, and each run's in ``runs``), read in
the current layout: a store written before the methods kind had its section ``methods``
holds that kind's keys at the top level (``grid``, ``model``, ...), and reads as if they
were in it."""

from __future__ import annotations

from typing import Any

import yaml

SECTION = "methods"
"""The section the methods kind's keys moved into."""

MOVED = ("grid", "model", "timing", "fuse_states", "exact_max_states", "gamma_exact_max_states")
"""The methods kind's top-level keys of the old layout, each now ``methods.<key>``."""


def stored_config(text: str | None) -> dict[str, Any]:
    """The stored config ``text`` (YAML; empty or None: ``{}``) as a mapping in the current
    layout: the old layout's top-level keys moved into ``methods`` where the store is of
    that kind (no ``kind``: ``methods``), and dropped for another kind, which never read
    them."""
    config = yaml.safe_load(text or "") or {}
    old = {key: config.pop(key) for key in MOVED if key in config}
    if old and config.get("kind", SECTION) == SECTION and config.get(SECTION) is None:
        config[SECTION] = old
    return config
