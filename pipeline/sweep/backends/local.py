"""``kind: local``: a ``LocalCluster`` of worker processes on this machine (the entries
``local`` and ``machine``)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Optional

from dask.system import CPU_COUNT
from dask.utils import format_bytes
from distributed import LocalCluster, system
from distributed.deploy.utils import nprocesses_nthreads
from distributed.worker_memory import parse_memory_limit

from pipeline.sweep.backends.base import Backend, SecurityConfig, dashboard
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.validation import choices, ranged

log = logging.getLogger("pipeline.sweep")

MIN_WORKER_MEMORY = 384 * 2**20
"""The least memory limit of a local worker: a worker of the pipeline holds about 270 MiB
before its first cell is done (Python, numpy, numba's kernels, distributed; measured on the
smoke sweep), and distributed pauses a worker at 80% of its limit and restarts it at 95%, so
below 384 MiB (80%: 307 MiB) a worker could not finish a cell."""
MEMORY_LIMITS = (
    "auto (the machine's memory shared out by cores), a size such as 4GiB, a fraction in "
    f"(0, 1] of the machine's memory, or 0 (no limit); at least {MIN_WORKER_MEMORY >> 20} MiB"
)
"""What ``cluster.memory_limit`` allows, as its error says it."""


@dataclass
class LocalClusterConfig:
    kind: str = choices("local", ["local"])
    """The cluster kind (``local``)."""
    n_workers: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """Worker processes (null: distributed's choice for this machine's cores). At most one
    per core, and no more than the machine's memory holds at each worker's memory limit
    (``memory_limit``; with none, 384 MiB each): more processes than cores only share the
    cores, so no cell finishes sooner and every timing is slowed, and workers whose limits
    add up past the memory are killed by the system before distributed can stop them.
    ``python -m pipeline.sweep cluster.n_workers=1000`` is refused at once, naming the
    bound, rather than spending minutes starting processes."""
    threads_per_worker: Optional[int] = ranged(1, least=1)  # noqa: UP045
    """Threads of each worker (null: the machine's cores shared out among the workers)."""
    memory_limit: str = choices(
        "auto", "auto, a size (4GiB), a fraction in (0, 1] of the memory, or 0; at least 384 MiB"
    )
    """Memory of each worker: ``auto`` (the machine's, shared out by cores: a worker of t
    threads gets t / cores of it), a size (``4GiB``, read by dask's ``parse_bytes``), a
    fraction in (0, 1] of the machine's memory, or 0 (no limit); at least 384 MiB
    (``MIN_WORKER_MEMORY``), below which a worker cannot finish a cell."""
    host: str = choices("127.0.0.1", "an address or host name of this machine")
    """Address the scheduler and the workers listen on (loopback: this machine only)."""
    dashboard_address: str = choices(":8787", "host:port, :port or :0")
    """host:port of the dashboard; ':port' listens on ``host``, ':0' on a free port."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    """TLS (``SecurityConfig``)."""
    wait_for_workers: float = ranged(60.0, least=0, above=True)
    """Seconds the sweep waits while no worker is connected before it stops (finished cells
    stay stored); lost workers are replaced meanwhile."""


def _threads(entry) -> int:
    """The threads of each worker ``LocalCluster`` starts for ``entry``, by its own rule:
    null shares the cores out among ``n_workers`` (rounded up), or, both null,
    distributed's split of the cores into processes and threads."""
    if entry.threads_per_worker:
        return entry.threads_per_worker
    if entry.n_workers:
        return max(1, math.ceil(CPU_COUNT / entry.n_workers))
    return nprocesses_nthreads()[1]


class Local(Backend):
    kind = "local"
    schema = LocalClusterConfig
    shares_terminal = True

    def validate(self, entry, tls: bool) -> None:
        limit = self._memory_limit(entry)
        each = limit or MIN_WORKER_MEMORY
        most = min(CPU_COUNT, system.MEMORY_LIMIT // each)
        if entry.n_workers is not None and entry.n_workers > most:
            raise ConfigError(
                "cluster.n_workers",
                f"{entry.n_workers} is not allowed; allowed: integers in [1, {most}] or null: "
                f"this machine has {CPU_COUNT} cores and {format_bytes(system.MEMORY_LIMIT)}, "
                f"and each worker takes a core and {format_bytes(each)} "
                f"(cluster.memory_limit={entry.memory_limit})",
            )

    def _memory_limit(self, entry) -> int | None:
        """``worker_memory``; ``ConfigError`` for a limit distributed cannot read or one
        below ``MIN_WORKER_MEMORY``."""
        try:
            limit = self.worker_memory(entry)
        except (ValueError, TypeError, OverflowError):
            raise ConfigError(
                "cluster.memory_limit",
                f"{entry.memory_limit!r} is not allowed; allowed: {MEMORY_LIMITS}",
            ) from None
        if limit is not None and limit < MIN_WORKER_MEMORY:
            raise ConfigError(
                "cluster.memory_limit",
                f"{entry.memory_limit!r} gives each worker {format_bytes(limit)}, too little "
                f"for a worker to run; allowed: {MEMORY_LIMITS}",
            )
        return limit

    def worker_memory(self, entry) -> int | None:
        return parse_memory_limit(entry.memory_limit, _threads(entry), CPU_COUNT, logger=log)

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
