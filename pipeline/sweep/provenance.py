"""What a results store records about how it was made, and never a secret.

The store's attributes hold the resolved config with the values of secret-looking keys
(passwords, passphrases, tokens, keys: ``SECRET_WORDS``) replaced by ``REDACTED``, and
nothing from the environment: no certificate or key contents, no tokens.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

PACKAGES = (
    "topp-pipeline",
    "numpy",
    "scipy",
    "numba",
    "dask",
    "distributed",
    "zarr",
    "xarray",
    "hydra-core",
    "threadpoolctl",
)


SECRET_WORDS = ("password", "passphrase", "secret", "token", "key")
"""A config key whose name contains one of these has its value redacted."""
REDACTED = "<redacted>"


def _redacted(node):
    if isinstance(node, dict):
        return {
            name: REDACTED
            if value is not None and any(word in str(name).lower() for word in SECRET_WORDS)
            else _redacted(value)
            for name, value in node.items()
        }
    if isinstance(node, list):
        return [_redacted(value) for value in node]
    return node


def public_config(cfg) -> str:
    """The resolved config as YAML, secret-looking values redacted (``SECRET_WORDS``)."""
    return OmegaConf.to_yaml(_redacted(OmegaConf.to_container(cfg, resolve=True)))


def now() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def git_commit() -> str:
    """The commit of the repository holding this package, or 'unknown'."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty else "")


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas() -> str:
    info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    return f"{info.get('name', 'unknown')} {info.get('version', '')}".strip()


def memory() -> str:
    """Total memory of this machine, e.g. '23.5 GiB'."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return "unknown"
    return f"{pages * size / 2**30:.1f} GiB"


def provenance() -> dict[str, str]:
    """Host, CPU, memory, BLAS, package versions and git commit of the client process."""
    return {
        "host": platform.node(),
        "cpu": f"{cpu()}, {os.cpu_count()} cores",
        "memory": memory(),
        "platform": platform.platform(),
        "blas": blas(),
        "versions": "\n".join(f"{k} {v}" for k, v in versions().items()),
        "git_commit": git_commit(),
    }
