"""``kind: local``: a ``LocalCluster`` of worker processes on this machine (the entries
``local`` and ``machine``)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Optional

from distributed import LocalCluster
from distributed.worker_memory import parse_memory_limit

from pipeline.sweep.backends.base import Backend, SecurityConfig, dashboard

log = logging.getLogger("pipeline.sweep")


@dataclass
class LocalClusterConfig:
    kind: str = "local"
    """The cluster kind (``local``)."""
    n_workers: Optional[int] = None  # noqa: UP045
    """Worker processes (null: distributed's choice for this machine's cores)."""
    threads_per_worker: Optional[int] = 1  # noqa: UP045
    """Threads of each worker (null: the machine's cores shared out among the workers)."""
    memory_limit: str = "auto"
    """Memory of each worker (``auto``: the machine's, shared out among the workers)."""
    host: str = "127.0.0.1"
    """Address the scheduler and the workers listen on (loopback: this machine only)."""
    dashboard_address: str = ":8787"
    """host:port of the dashboard; ':port' listens on ``host``, ':0' on a free port."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    """TLS (``SecurityConfig``)."""
    wait_for_workers: float = 60.0
    """Seconds the sweep waits while no worker is connected before it stops (finished cells
    stay stored); lost workers are replaced meanwhile."""


class Local(Backend):
    kind = "local"
    schema = LocalClusterConfig
    positive = ("n_workers", "threads_per_worker")
    shares_terminal = True

    def worker_memory(self, entry) -> int:
        cores = os.cpu_count() or 1
        threads = entry.threads_per_worker or max(1, cores // (entry.n_workers or cores))
        return parse_memory_limit(entry.memory_limit, threads, cores, logger=log)

    def start(self, entry, security):
        cluster = LocalCluster(
            n_workers=entry.n_workers,
            threads_per_worker=entry.threads_per_worker,
            processes=True,
            memory_limit=entry.memory_limit,
            host=entry.host,
            dashboard_address=dashboard(entry),
            protocol="tls://" if security else None,
            security=security,
            resources=self.memory_resource(entry),
        )
        size = len(cluster.worker_spec)
        return cluster, lambda: cluster.scale(size)
