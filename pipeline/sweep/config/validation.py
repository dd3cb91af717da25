"""What every sweep's config shares: ``ConfigError``, the checks its keys go through, and
the checks of the keys every kind has (timing, retries, the store's path)."""

from __future__ import annotations

import tempfile
from pathlib import Path


class ConfigError(ValueError):
    """An invalid setting: ``key`` names it, the message says what is allowed."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


INT64 = (-(2**63), 2**63 - 1)
"""The range of the store's integer coordinates."""


def check_list(key: str, values, kind, allowed: str) -> None:
    """Raise ``ConfigError`` at ``key`` unless ``values`` is a non-empty list of distinct
    ``kind`` values (no bools); ``allowed`` says what is allowed."""
    if not values:
        raise ConfigError(key, f"must not be empty; allowed: a list of {allowed}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ConfigError(key, f"{value!r} is not allowed; allowed: {allowed}")
        if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
            raise ConfigError(
                key, f"{value} does not fit the store's 64-bit integers; allowed: {allowed}"
            )
    if len(set(values)) != len(values):
        raise ConfigError(key, f"has duplicates {list(values)}; list each value once")


def check_at_least(key: str, value, least) -> None:
    """Raise ``ConfigError`` at ``key`` unless ``value >= least``."""
    if value < least:
        raise ConfigError(key, f"{value} is not allowed; allowed: integers >= {least}")


def validate_shared(cfg) -> None:
    """Raise ``ConfigError`` naming the first invalid key that every sweep kind has (the
    cluster's are ``clusters.validate_cluster``'s)."""
    for key, value, least in (
        ("timing.repeats", cfg.timing.repeats, 1),
        ("timing.max_repeats", cfg.timing.max_repeats, cfg.timing.repeats),
        ("timing.blas_threads", cfg.timing.blas_threads, 1),
        ("retries", cfg.retries, 0),
        ("max_cells", cfg.max_cells, 1),
        ("fuse_states", cfg.fuse_states, 0),
        ("gamma_exact_max_states", cfg.gamma_exact_max_states, 2),
        ("exact_max_states", 2 if cfg.exact_max_states is None else cfg.exact_max_states, 2),
    ):
        check_at_least(key, value, least)
    for key in ("flush_seconds", "progress_seconds"):
        if not cfg[key] > 0:
            raise ConfigError(key, f"{cfg[key]} is not allowed; allowed: numbers > 0")
    if cfg.timing.min_seconds < 0:
        raise ConfigError(
            "timing.min_seconds", f"{cfg.timing.min_seconds} is not allowed; allowed: numbers >= 0"
        )


def _probe(folder: Path) -> str | None:
    """Why a file cannot be created (and removed) in ``folder``, or None if it can."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as error:
        return error.strerror or type(error).__name__
    return None


def check_writable(path: Path) -> None:
    """Raise ``ConfigError`` unless a store can be created or updated at ``path``: a file is
    created and removed where the store and its lock go (not ``os.access``, which a
    read-only or virtual file system answers wrongly)."""
    path = Path(path)
    if not path.name or path.name in (".", ".."):
        raise ConfigError(
            "store", f"{str(path)!r} names no store; allowed: a folder's path, e.g. outputs/x.zarr"
        )
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError("store", f"cannot create {path}: {parent} is not a directory")
    for folder in (parent, path) if path.is_dir() else (parent,):
        why = _probe(folder)
        if why:
            raise ConfigError("store", f"cannot write {path}: {folder} refuses new files ({why})")
