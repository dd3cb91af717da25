"""The ``cluster`` config group: ``dask_cluster.yaml``'s entries read as options of their
back-end's schema (``pipeline.sweep.backends``), whether TLS is on, and the checks of a
cluster's keys every back-end shares.

Its namesake ``pipeline.hmmlm.clusters`` is about clusters of words; these are Dask
clusters.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import typing
from pathlib import Path

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from pipeline.sweep.backends import BACKENDS, SecurityConfig
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.schema import SHIPPED_CLUSTERS
from pipeline.sweep.config.validation import check_ranges

CLUSTER_FILE = "dask_cluster.yaml"


def cluster_file() -> Path:
    """``dask_cluster.yaml`` of the working directory, else the one the project ships
    (``schema.SHIPPED_CLUSTERS``; from the repository's top level the two are one file)."""
    local = Path(CLUSTER_FILE)
    return local if local.is_file() else SHIPPED_CLUSTERS


def load_clusters(path: Path | None = None) -> dict[str, object]:
    """The named cluster definitions of ``dask_cluster.yaml`` as schema instances."""
    path = path or cluster_file()
    try:
        entries = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(CLUSTER_FILE, f"cannot read {path}: {error}") from None
    if not isinstance(entries, dict):
        raise ConfigError(
            CLUSTER_FILE, f"{path} holds {_kind(entries)}; allowed: a mapping of names to entries"
        )
    clusters = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict | None):
            raise ConfigError(
                f"{CLUSTER_FILE}: {name}",
                f"{entry!r} is not allowed; allowed: a mapping with a kind ({', '.join(BACKENDS)})",
            )
        entry = dict(entry or {})
        kind = entry.get("kind", name)
        if kind not in BACKENDS:
            raise ConfigError(
                f"{CLUSTER_FILE}: {name}.kind",
                f"unknown kind {kind!r}; allowed: {', '.join(BACKENDS)}",
            )
        _check_keys(entry, BACKENDS[kind].schema, f"{name}", f"a {kind} cluster")
        if "security" in entry:
            security = entry["security"]
            if not isinstance(security, dict):
                raise ConfigError(
                    f"{CLUSTER_FILE}: {name}.security",
                    f"{security!r} is not allowed; allowed: a mapping of "
                    f"{', '.join(f.name for f in dataclasses.fields(SecurityConfig))}",
                )
            _check_keys(security, SecurityConfig, f"{name}.security", "security")
            entry["security"] = SecurityConfig(**security)
            _check_types(entry["security"], f"{name}.security")
        clusters[name] = _opened(BACKENDS[kind].schema(**{**entry, "kind": kind}))
        _check_types(clusters[name], name)
    return clusters


def _opened(entry):
    """``entry`` with each free mapping of its schema (a field typed ``dict[str, Any]``, such
    as ssh's ``connect_options``, passed on as it is) open to new keys: Hydra's struct mode
    would refuse ``cluster.connect_options={username: me}`` ("not in struct") while every
    other key of the entry stays checked."""
    hints = typing.get_type_hints(type(entry))
    for field in dataclasses.fields(entry):
        value = getattr(entry, field.name)
        if typing.get_origin(hints[field.name]) is dict and isinstance(value, dict):
            setattr(entry, field.name, OmegaConf.create(value, flags={"struct": False}))
    return entry


def _kind(value) -> str:
    return "nothing" if value is None else f"a {type(value).__name__}"


def _check_types(entry, name: str) -> None:
    """``ConfigError`` in one line, in OmegaConf's words as for an override, where a value of
    ``entry`` (the schema instance of entry ``name``) has a type its field does not take
    (``n_workers: abc``), before Hydra registers the entry."""
    try:
        OmegaConf.structured(entry)
    except ValidationError as error:
        raise ConfigError(
            f"{CLUSTER_FILE}: {name}.{error.full_key}", str(error).splitlines()[0]
        ) from None


def _check_keys(entry: dict, schema: type, where: str, what: str) -> None:
    allowed = [f.name for f in dataclasses.fields(schema)]
    unknown = sorted(set(entry) - set(allowed))
    if unknown:
        raise ConfigError(
            f"{CLUSTER_FILE}: {where}.{unknown[0]}",
            f"unknown key for {what}; allowed: {', '.join(allowed)}",
        )


def listens_beyond_loopback(cluster) -> bool:
    """Whether the scheduler the sweep starts for ``cluster`` can be reached from other
    machines: ``host`` null (every interface), a host name or an address other than loopback,
    or an ``interface``. False for ``address``, whose scheduler the sweep does not start."""
    if not BACKENDS[cluster.kind].starts_scheduler:
        return False
    if getattr(cluster, "interface", None):
        return True
    host = cluster.host
    if not host:  # every interface
        return True
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: its address may be any
        return True


def temporary_tls(cluster) -> bool:
    """Whether the sweep makes a temporary certificate authority for ``cluster``: asked for
    (``security.temporary`` true), or by default (null) for a scheduler that listens beyond
    loopback when no certificate files of the user's are set."""
    security = cluster.security
    if security.temporary is None:
        files = security.ca_file or security.cert or security.key
        return not files and listens_beyond_loopback(cluster)
    return security.temporary


def certificate_directory(security) -> Path | None:
    """``security.directory`` with its variables and ``~`` expanded; None: the system's
    temporary directory."""
    if not security.directory:
        return None
    return Path(os.path.expandvars(security.directory)).expanduser()


def validate_cluster(cluster) -> None:
    """Raise ``ConfigError`` naming the first invalid key of the chosen ``cluster``: the
    numbers out of the ranges its back-end's schema declares, then TLS, then the back-end's
    own checks."""
    backend = BACKENDS[cluster.kind]
    check_ranges(cluster, backend.schema, "cluster.")
    tls = _validate_security(cluster)
    backend.validate(cluster, tls)


def _validate_security(cluster) -> bool:
    """Whether ``cluster.security`` turns TLS on; its files and directory must exist."""
    security = cluster.security
    files = {name: security[name] for name in ("ca_file", "cert", "key")}
    if security.temporary and not BACKENDS[cluster.kind].starts_scheduler:
        raise ConfigError(
            "cluster.security.temporary",
            "the pipeline does not start this scheduler; allowed: ca_file, cert and key "
            "of the scheduler's certificate authority",
        )
    if security.temporary and any(files.values()):
        raise ConfigError("cluster.security", "set either temporary or ca_file and cert, not both")
    if temporary_tls(cluster):
        directory = certificate_directory(security)
        if directory and not directory.is_dir():
            raise ConfigError(
                "cluster.security.directory",
                f"{security.directory} is not a directory; allowed: an existing directory "
                "(null: the system's temporary directory)",
            )
        return True
    if not any(files.values()):
        return False
    for name in ("ca_file", "cert"):
        if not files[name]:
            raise ConfigError(f"cluster.security.{name}", "is not set; TLS needs ca_file and cert")
    for name, path in files.items():
        if path and not Path(path).is_file():
            raise ConfigError(f"cluster.security.{name}", f"{path} is not a file")
    return True
