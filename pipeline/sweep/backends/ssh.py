"""``kind: ssh``: a scheduler and workers started over SSH on a list of hosts (the ``ssh``
extra: asyncssh), each running the pipeline's Python."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from pipeline.sweep.backends.base import (
    Backend,
    SecurityConfig,
    dashboard,
    optional_module,
    plain,
)
from pipeline.sweep.config.validation import ConfigError


@dataclass
class SSHClusterConfig:
    kind: str = "ssh"
    """The cluster kind (``ssh``)."""
    hosts: list[str] = field(default_factory=lambda: ["localhost", "localhost"])
    """The first runs the scheduler, every other one workers."""
    workers_per_host: int = 1
    """Worker processes on each worker host."""
    threads_per_worker: int = 1
    """Threads of each worker."""
    remote_python: Optional[str] = None  # noqa: UP045
    """Python on the remote hosts, e.g. ``/opt/venv/bin/python`` (null: this one's path)."""
    connect_options: dict[str, Any] = field(default_factory=dict)
    """asyncssh's connect options, e.g. ``{username: me, port: 22, client_keys:
    [~/.ssh/id_ed25519], known_hosts: ~/.ssh/known_hosts}``."""
    host: Optional[str] = None  # noqa: UP045
    """Address the scheduler and the workers listen on, each on its host: null, every
    interface (TLS by default); 127.0.0.1, that host only."""
    dashboard_address: str = "127.0.0.1:8787"
    """host:port of the dashboard, on the scheduler's host."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    """TLS (``SecurityConfig``)."""
    wait_for_workers: float = 120.0
    """Seconds the sweep waits while no worker is connected before it stops."""


class SSH(Backend):
    kind = "ssh"
    schema = SSHClusterConfig
    positive = ("workers_per_host", "threads_per_worker")

    def validate(self, entry, tls: bool) -> None:
        if len(entry.hosts) < 2:
            raise ConfigError(
                "cluster.hosts", "needs the scheduler host and at least one worker host"
            )

    def start(self, entry, security):
        optional_module("asyncssh", "ssh", "ssh")
        from distributed import SSHCluster

        listen = {"host": entry.host} if entry.host else {}
        cluster = SSHCluster(
            list(entry.hosts),
            connect_options=plain(entry.connect_options),
            worker_options={
                "n_workers": entry.workers_per_host,
                "nthreads": entry.threads_per_worker,
                **listen,
            },
            scheduler_options={
                "dashboard_address": dashboard(entry),
                **listen,
                **({"protocol": "tls"} if security else {}),
            },
            remote_python=entry.remote_python,
            security=security,
        )
        size = len(cluster.worker_spec)
        return cluster, lambda: cluster.scale(size)
