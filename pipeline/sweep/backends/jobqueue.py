"""``kind: slurm`` and ``kind: pbs``: workers in batch jobs through dask-jobqueue (the
``jobqueue`` extra), submitted from this machine (a login node) with ``sbatch`` or ``qsub``."""

from __future__ import annotations

import contextlib
import re
import shutil
from dataclasses import dataclass, field
from typing import Optional

from dask.utils import parse_bytes

from pipeline.environment import WORKER_ENVIRONMENT
from pipeline.sweep.backends.base import (
    IN_MEMORY,
    Backend,
    SecurityConfig,
    dashboard,
    optional_module,
    plain,
)
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.config.validation import choices, ranged

MAX_JOBS = 1000
"""The most batch jobs one sweep keeps: a batch system caps the jobs a user may queue
(SLURM's ``MaxSubmitJobs``, PBS's ``max_queued``), often at a few hundred to a few thousand,
each job is submitted one by one from the login node, and every worker reports to the one
scheduler in the sweep's process; ``jobs=4000`` for ``40`` should not flood the queue."""
WALLTIME = re.compile(r"(?:(\d+)-)?(\d+):([0-5]\d):([0-5]\d)")
"""A batch job's walltime: HH:MM:SS, or D-HH:MM:SS (SLURM only)."""


@dataclass
class JobqueueClusterConfig:
    kind: str = choices("slurm", ["slurm", "pbs"])
    """The cluster kind (``slurm`` or ``pbs``)."""
    jobs: int = ranged(1, least=1, most=MAX_JOBS)
    """Batch jobs kept running (lost ones are submitted again); at most 1000 (``MAX_JOBS``):
    for more workers, give each job more ``cores`` and ``processes``."""
    cores: int = ranged(1, least=1)
    """Cores of each job (``#SBATCH --cpus-per-task``)."""
    processes: int = ranged(1, least=1)
    """Worker processes per job, sharing its cores and memory."""
    memory: str = choices("4GiB", "a size (4GiB, 500MB)")
    """Memory per job (``#SBATCH --mem``), split among its workers."""
    walltime: str = choices("01:00:00", "HH:MM:SS; slurm also D-HH:MM:SS")
    """Each job's time limit: HH:MM:SS (SLURM: also D-HH:MM:SS)."""
    queue: Optional[str] = None  # noqa: UP045
    """The partition (SLURM) or queue (PBS); null: the default one."""
    account: Optional[str] = None  # noqa: UP045
    """The account the jobs are charged to; null: the default one."""
    job_extra_directives: list[str] = field(default_factory=list)
    """More directives of the job script, e.g. ``["--qos=short"]``."""
    job_script_prologue: list[str] = field(default_factory=list)
    """Commands the job script runs before the worker, e.g. ``["module load python/3.11",
    "source .venv/bin/activate"]``."""
    local_directory: Optional[str] = None  # noqa: UP045
    """The workers' scratch space, e.g. ``$TMPDIR``."""
    interface: Optional[str] = None  # noqa: UP045
    """Network interface of the scheduler and workers, e.g. ib0 (null: the default route)."""
    host: Optional[str] = None  # noqa: UP045
    """Address the scheduler and workers listen on: null, every interface (as workers on
    other nodes need; TLS by default); 127.0.0.1, this machine only."""
    dashboard_address: str = choices("127.0.0.1:8787", "host:port or :port")
    """host:port of the dashboard (loopback: reach it with ``ssh -L 8787:127.0.0.1:8787``)."""
    death_timeout: float = ranged(60.0, least=0, above=True)
    """Seconds a worker outlives an unreachable scheduler before its job ends."""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    """TLS (``SecurityConfig``)."""
    wait_for_workers: float = ranged(3600.0, least=0, above=True)
    """Seconds the sweep waits while no worker is connected before it stops (jobs may wait in
    the queue)."""


async def _submit(cluster, jobs: int) -> None:
    """Submit ``jobs`` batch jobs and wait for the submit command's answers, so a refusal
    (e.g. sbatch's "invalid partition") is raised here instead of logged in the background.

    ``scale`` asks for the jobs and awaiting the cluster submits them (on its event loop).
    That raises a refusal only when it submitted the jobs itself, not when the background
    correction ``scale`` schedules got there first; so each job is awaited too, which
    returns once the batch system has it, and submits a refused one again: a refusal
    raises here either way.
    """
    cluster.scale(jobs=jobs)
    await cluster
    for job in list(cluster.workers.values()):
        await job


class Jobqueue(Backend):
    """A batch system through dask-jobqueue: ``cluster_class`` is its cluster's name there."""

    schema = JobqueueClusterConfig

    def __init__(self, kind: str, cluster_class: str, days: bool):
        self.kind, self.cluster_class, self.days = kind, cluster_class, days

    def validate(self, entry, tls: bool) -> None:
        match = WALLTIME.fullmatch(entry.walltime)
        if match is None or (match[1] and not self.days):
            allowed = "HH:MM:SS" + (", or D-HH:MM:SS" if self.days else "")
            raise ConfigError(
                "cluster.walltime", f"{entry.walltime!r} is not allowed; allowed: {allowed}"
            )
        try:
            parse_bytes(entry.memory)
        except (ValueError, TypeError):
            raise ConfigError(
                "cluster.memory", f"{entry.memory!r} is not allowed; allowed: a size, e.g. 4GiB"
            ) from None
        if entry.host and entry.interface:
            raise ConfigError(
                "cluster.host", "set host or interface, not both (both say where to listen)"
            )
        if entry.processes > entry.cores:
            raise ConfigError(
                "cluster.processes",
                f"{entry.processes} worker processes on {entry.cores} cores; "
                "allowed: at most cluster.cores",
            )

    def worker_memory(self, entry) -> int:
        return int(parse_bytes(entry.memory) / entry.processes)

    def options(self, entry) -> dict:
        """dask-jobqueue's keyword arguments for an entry (TLS aside)."""
        options = {
            name: plain(entry[name])
            for name in (
                "cores",
                "processes",
                "memory",
                "walltime",
                "queue",
                "account",
                "job_extra_directives",
                "job_script_prologue",
                "local_directory",
                "interface",
                "death_timeout",
            )
        }
        scheduler = {"dashboard_address": dashboard(entry)}
        # the scheduler's dashboard is the sweep's; a worker's own would only slow its start
        options["worker_extra_args"] = ["--no-dashboard"]
        if entry.host:
            scheduler["host"] = entry.host
            options["worker_extra_args"] += ["--host", entry.host]
        options["job_script_prologue"] = [
            *(options["job_script_prologue"] or []),
            *(
                f"export DASK_{key.upper().replace('.', '__')}={value}"
                for key, value in IN_MEMORY.items()
            ),
            # the job's own value, if it has one, wins (as for a local worker)
            *(f"export {name}=${{{name}:-{value}}}" for name, value in WORKER_ENVIRONMENT.items()),
        ]
        for name, size in (self.memory_resource(entry) or {}).items():
            options["worker_extra_args"] += ["--resources", f"{name}={size}"]
        return {**options, "scheduler_options": scheduler}

    def start(self, entry, security):
        jobqueue = optional_module("dask_jobqueue", "jobqueue", self.kind)
        cls = getattr(jobqueue, self.cluster_class)
        submit = cls.job_cls.submit_command
        if shutil.which(submit) is None:
            raise ConfigError(
                "cluster", f"cluster={self.kind} needs {submit} on PATH (a {self.kind} login node)"
            )
        cluster = cls(**self.options(entry), security=security)
        try:
            cluster.sync(_submit, cluster, entry.jobs)
        except BaseException:
            # SpecCluster cannot close a job that was never submitted (it asserts on
            # its state); close what it can, the caller reports the refusal.
            with contextlib.suppress(Exception):
                cluster.close()
            raise
        return cluster, lambda: cluster.scale(jobs=entry.jobs)
