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
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.validation import choices, ranged

MAX_WORKERS_PER_HOST = 512
"""The most worker processes per host: each wants a core of its own, and the largest
machines have fewer (two 192-core processors: 384). The sweep cannot see a remote host's
cores, so this stops an extra zero (``workers_per_host=40`` for 4), not a plan."""


@dataclass
class SSHClusterConfig:
    kind: str = choices("ssh", ["ssh"])
    """The cluster kind (``ssh``)."""
    hosts: list[str] = field(default_factory=lambda: ["localhost", "localhost"])
    """The first runs the scheduler, every other one workers."""
    workers_per_host: int = ranged(1, least=1, most=MAX_WORKERS_PER_HOST)
    """Worker processes on each worker host (at most 512, ``MAX_WORKERS_PER_HOST``)."""
    threads_per_worker: int = ranged(1, least=1)
    """Threads of each worker."""
    remote_python: Optional[str] = None  # noqa: UP045
    """Python on the remote hosts, e.g. ``/opt/venv/bin/python`` (null: this one's path)."""
    connect_options: dict[str, Any] = field(default_factory=dict)
    """asyncssh's connect options, e.g. ``{username: me, port: 22, client_keys:
    [~/.ssh/id_ed25519], known_hosts: ~/.ssh/known_hosts}``."""
    host: Optional[str] = None  # noqa: UP045
    """Address the scheduler and the workers listen on, each on its host: null, every
    interface (TLS by default); 127.0.0.1, that host only."""
    dashboard_address: str = choices("127.0.0.1:8787", "host:port or :port")
    """host:port of the dashboard, on the scheduler's host."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    """TLS (``SecurityConfig``)."""
    wait_for_workers: float = ranged(120.0, least=0, above=True)
    """Seconds the sweep waits while no worker is connected before it stops."""


class SSH(Backend):
    kind = "ssh"
    schema = SSHClusterConfig

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
