"""The ``cluster`` config group: every cluster kind's schema, ``dask_cluster.yaml``'s
entries read as its options, and the checks of a cluster's keys."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml
from dask.utils import parse_bytes

from pipeline.sweep.config.schema import CONFIG_DIR
from pipeline.sweep.config.validation import ConfigError

CLUSTER_FILE = "dask_cluster.yaml"
WALLTIME = re.compile(r"(?:(\d+)-)?(\d+):([0-5]\d):([0-5]\d)")
"""A batch job's walltime: HH:MM:SS, or D-HH:MM:SS (SLURM only)."""


@dataclass
class SecurityConfig:
    """TLS between this client, the scheduler and the workers (``distributed.security``).

    On with certificate files of your own (``ca_file``, ``cert``) or a temporary
    certificate authority (``temporary``); when on, every connection is encrypted and both
    ends must present a certificate signed by the authority."""

    temporary: Optional[bool] = None  # noqa: UP045
    """Generate a certificate authority and a certificate for this sweep alone (kinds that
    start the scheduler and the workers: local, slurm, pbs, ssh). null: do so where the
    scheduler listens beyond loopback (``listens_beyond_loopback``) and no ca_file or cert is
    set; false: never (anyone who reaches the scheduler's port can then run code on the
    workers)."""
    directory: Optional[str] = None  # noqa: UP045
    """Where the temporary certificate files go: a new private directory (mode 700) in it,
    removed at the end. null: the system's temporary directory, which workers on this
    machine see; workers on other machines need a directory they see at the same path (a
    shared file system), e.g. ``$HOME`` (variables and ``~`` are expanded)."""
    ca_file: Optional[str] = None  # noqa: UP045
    """PEM file of the certificate authority (your own certificates)."""
    cert: Optional[str] = None  # noqa: UP045
    """PEM certificate for this client, the scheduler and the workers, signed by ca_file."""
    key: Optional[str] = None  # noqa: UP045
    """PEM private key of cert (null: cert holds it)."""


@dataclass
class LocalClusterConfig:
    kind: str = "local"
    n_workers: Optional[int] = None  # noqa: UP045
    threads_per_worker: Optional[int] = 1  # noqa: UP045
    """Threads of each worker (null: the machine's cores shared out among the workers)."""
    memory_limit: str = "auto"
    host: str = "127.0.0.1"
    """Address the scheduler and the workers listen on (loopback: this machine only)."""
    dashboard_address: str = ":8787"
    """host:port of the dashboard; ':port' listens on ``host``, ':0' on a free port."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    wait_for_workers: float = 60.0
    """Seconds the sweep waits while no worker is connected before it stops (finished cells
    stay stored); lost workers are replaced meanwhile."""


@dataclass
class AddressClusterConfig:
    kind: str = "address"
    address: str = "tcp://127.0.0.1:8786"
    timeout: float = 5.0
    security: SecurityConfig = field(default_factory=SecurityConfig)
    wait_for_workers: float = 60.0


@dataclass
class JobqueueClusterConfig:
    kind: str = "slurm"
    jobs: int = 1
    cores: int = 1
    processes: int = 1
    memory: str = "4GiB"
    walltime: str = "01:00:00"
    queue: Optional[str] = None  # noqa: UP045
    account: Optional[str] = None  # noqa: UP045
    job_extra_directives: list[str] = field(default_factory=list)
    job_script_prologue: list[str] = field(default_factory=list)
    local_directory: Optional[str] = None  # noqa: UP045
    interface: Optional[str] = None  # noqa: UP045
    """Network interface of the scheduler and workers, e.g. ib0 (null: the default route)."""
    host: Optional[str] = None  # noqa: UP045
    """Address the scheduler and workers listen on: null, every interface (as workers on
    other nodes need; TLS by default); 127.0.0.1, this machine only."""
    dashboard_address: str = "127.0.0.1:8787"
    death_timeout: float = 60.0
    """Seconds a worker outlives an unreachable scheduler before its job ends."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    wait_for_workers: float = 3600.0


@dataclass
class SSHClusterConfig:
    kind: str = "ssh"
    hosts: list[str] = field(default_factory=lambda: ["localhost", "localhost"])
    workers_per_host: int = 1
    threads_per_worker: int = 1
    remote_python: Optional[str] = None  # noqa: UP045
    connect_options: dict[str, Any] = field(default_factory=dict)
    host: Optional[str] = None  # noqa: UP045
    """Address the scheduler and the workers listen on, each on its host: null, every
    interface (TLS by default); 127.0.0.1, that host only."""
    dashboard_address: str = "127.0.0.1:8787"
    security: SecurityConfig = field(default_factory=SecurityConfig)
    wait_for_workers: float = 120.0


CLUSTER_KINDS = {
    "local": LocalClusterConfig,
    "address": AddressClusterConfig,
    "slurm": JobqueueClusterConfig,
    "pbs": JobqueueClusterConfig,
    "ssh": SSHClusterConfig,
}
"""Every cluster kind's schema; dask_cluster.yaml documents each key."""


def cluster_file() -> Path:
    """``dask_cluster.yaml`` of the working directory, else the one the package ships."""
    local = Path(CLUSTER_FILE)
    return local if local.is_file() else CONFIG_DIR / CLUSTER_FILE


def load_clusters(path: Path | None = None) -> dict[str, object]:
    """The named cluster definitions of ``dask_cluster.yaml`` as schema instances."""
    path = path or cluster_file()
    try:
        entries = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(CLUSTER_FILE, f"cannot read {path}: {error}") from None
    clusters = {}
    for name, entry in entries.items():
        entry = dict(entry or {})
        kind = entry.get("kind", name)
        if kind not in CLUSTER_KINDS:
            raise ConfigError(
                f"{CLUSTER_FILE}: {name}.kind",
                f"unknown kind {kind!r}; allowed: {', '.join(CLUSTER_KINDS)}",
            )
        _check_keys(entry, CLUSTER_KINDS[kind], f"{name}", f"a {kind} cluster")
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
        clusters[name] = CLUSTER_KINDS[kind](**{**entry, "kind": kind})
    return clusters


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
    if cluster.kind == "address":
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
    """Raise ``ConfigError`` naming the first invalid key of the chosen ``cluster``."""
    positive = {
        "local": ("n_workers", "threads_per_worker"),
        "address": ("timeout",),
        "slurm": ("jobs", "cores", "processes", "death_timeout"),
        "pbs": ("jobs", "cores", "processes", "death_timeout"),
        "ssh": ("workers_per_host", "threads_per_worker"),
    }[cluster.kind]
    for name in (*positive, "wait_for_workers"):
        value = cluster[name]
        if value is not None and not value > 0:
            raise ConfigError(f"cluster.{name}", f"{value} is not allowed; allowed: numbers > 0")
    if cluster.kind in ("slurm", "pbs"):
        _validate_jobs(cluster)
    if cluster.kind == "ssh" and len(cluster.hosts) < 2:
        raise ConfigError("cluster.hosts", "needs the scheduler host and at least one worker host")
    tls = _validate_security(cluster)
    if cluster.kind == "address":
        scheme, found, _ = cluster.address.partition("://")
        if not found:
            raise ConfigError(
                "cluster.address",
                f"{cluster.address!r} is not a scheduler address; allowed: "
                "protocol://host:port, e.g. tcp://127.0.0.1:8786",
            )
        if (scheme == "tls") != tls:
            raise ConfigError(
                "cluster.address",
                f"{cluster.address} needs cluster.security.ca_file and cert"
                if tls is False
                else f"{cluster.address} is unencrypted; with cluster.security use tls://",
            )


def _validate_jobs(cluster) -> None:
    """The batch job's walltime, memory, cores and listening address."""
    match = WALLTIME.fullmatch(cluster.walltime)
    if match is None or (match[1] and cluster.kind == "pbs"):
        allowed = "HH:MM:SS" + (", or D-HH:MM:SS" if cluster.kind == "slurm" else "")
        raise ConfigError(
            "cluster.walltime", f"{cluster.walltime!r} is not allowed; allowed: {allowed}"
        )
    try:
        parse_bytes(cluster.memory)
    except (ValueError, TypeError):
        raise ConfigError(
            "cluster.memory", f"{cluster.memory!r} is not allowed; allowed: a size, e.g. 4GiB"
        ) from None
    if cluster.host and cluster.interface:
        raise ConfigError(
            "cluster.host", "set host or interface, not both (both say where to listen)"
        )
    if cluster.processes > cluster.cores:
        raise ConfigError(
            "cluster.processes",
            f"{cluster.processes} worker processes on {cluster.cores} cores; "
            "allowed: at most cluster.cores",
        )


def _validate_security(cluster) -> bool:
    """Whether ``cluster.security`` turns TLS on; its files and directory must exist."""
    security = cluster.security
    files = {name: security[name] for name in ("ca_file", "cert", "key")}
    if security.temporary and cluster.kind == "address":
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
