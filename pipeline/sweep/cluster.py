"""Dask clusters from ``dask_cluster.yaml`` entries: start or connect, keep, close.

The sweep's entry point makes the client here and passes it down; nothing
else in the pipeline creates one. A cluster started here listens where its
entry says (``host``, ``dashboard_address``: loopback for a local cluster),
is scaled back to its size while the sweep runs, so a lost worker or batch job
is replaced, and is closed on exit, which cancels a jobqueue cluster's jobs.
An entry's ``security`` turns on TLS with mutual authentication: certificate
files of your own, or a temporary certificate authority for this sweep alone, which a
scheduler that listens beyond loopback gets unless the entry turns it off.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import dask
from dask.utils import parse_bytes
from distributed import Client, LocalCluster, Security
from distributed.comm import connect as comm_connect
from distributed.utils import format_dashboard_link
from distributed.worker_memory import parse_memory_limit
from omegaconf import OmegaConf
from tornado.ioloop import PeriodicCallback

from pipeline.sweep.config import ConfigError
from pipeline.sweep.config.clusters import certificate_directory, temporary_tls
from pipeline.sweep.logs import WorkerLog

log = logging.getLogger("pipeline.sweep")

MEMORY = "MEMORY"
"""The worker resource a started cluster declares, its memory limit in bytes: a large cell's
tasks reserve their estimate of it, so two that would not fit side by side never share a
worker."""
KEEP_SECONDS = 2.0
"""How often a started cluster is scaled back to its size (replacing lost workers)."""
LOST_WORKER_TIMEOUT = "3s"
"""How long a started cluster waits for a lost worker to come back before replacing it."""
IN_MEMORY = {"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False}
"""A started cluster's workers keep task results in memory, never spilled to disk: a sweep's
results are models and approximations that its running tasks hold, so spilling one frees
nothing and reading it back makes a second copy (distributed spills from 70% of a worker's
memory, which a 10^7-state cell passes), whose arrays may come back unaligned, which numpy
sums in other blocks (a stored mean moved by 2e-15). Pausing at 80% and restarting at 95%
stay."""


ANSWER_GRACE = 0.5
"""Seconds beyond ``cluster.timeout`` that something which accepted the connection at a
``cluster.address`` has to answer distributed's handshake: distributed gives up on an address
nothing accepts at the timeout itself, so a wait this much longer runs out only on a
listener that accepted and stays silent."""


class NoWorkers(RuntimeError):
    """No worker was connected for ``wait_for_workers`` seconds."""


def _optional(module: str, extra: str, kind: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            "cluster",
            f"cluster={kind} needs {module.split('.')[0]}: pip install 'topp-pipeline[{extra}]'",
        ) from None


def _plain(value):
    """A config value as plain Python (lists and dicts, not OmegaConf nodes)."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def tls_settings(ca_file: str, cert: str, key: str | None) -> dict:
    """Dask settings that make this process, the scheduler and the workers use TLS with
    these files (absolute paths, so processes started elsewhere find them)."""

    def absolute(path):
        return str(Path(path).resolve()) if path else None

    settings = {
        "distributed.comm.require-encryption": True,
        "distributed.comm.tls.ca-file": absolute(ca_file),
    }
    for role in ("client", "scheduler", "worker"):
        settings[f"distributed.comm.tls.{role}.cert"] = absolute(cert)
        settings[f"distributed.comm.tls.{role}.key"] = absolute(key)
    return settings


@contextlib.contextmanager
def _temporary_certificates(directory: Path | None) -> Iterator[dict[str, Path]]:
    """A new certificate authority and one certificate for every role
    (``Security.temporary``), as PEM files in a new private directory (mode 700, the key
    mode 600) in ``directory`` (None: the system's temporary directory, which the system
    cleans, so not even a killed sweep leaves them in the working directory); removed on
    exit, an interrupt or a SIGTERM (which the command line turns into one) included."""
    generated = Security.temporary()
    pem = {
        "ca_file": generated.tls_ca_file,
        "cert": generated.tls_scheduler_cert,
        "key": generated.tls_scheduler_key,
    }
    with tempfile.TemporaryDirectory(prefix=".dask-tls-", dir=directory) as folder:
        paths = {}
        for name, text in pem.items():
            paths[name] = Path(folder) / f"{name}.pem"
            paths[name].touch(mode=0o600)
            paths[name].write_text(text)
        yield paths


@contextlib.contextmanager
def tls(cfg) -> Iterator[dict]:
    """Dask's TLS settings for the cluster entry ``cfg`` ({} when TLS is off): a temporary
    certificate authority's (``temporary_tls``: asked for, or a scheduler that listens beyond
    loopback) or the files of ``cfg.security``."""
    security = cfg.security
    if temporary_tls(cfg):
        with _temporary_certificates(certificate_directory(security)) as paths:
            log.info(
                "TLS: a temporary certificate authority in %s (workers must see it at this "
                "path: cluster.security.directory)",
                paths["key"].parent,
            )
            yield tls_settings(**paths)
    elif security.ca_file:
        yield tls_settings(security.ca_file, security.cert, security.key)
    else:
        yield {}


def _dashboard(cfg) -> str:
    """``dashboard_address`` with ``host`` filled in for a bare ``:port``."""
    address = cfg.dashboard_address
    return f"{cfg.host}{address}" if address.startswith(":") and cfg.host else address


def jobqueue_options(cfg) -> dict:
    """dask-jobqueue's keyword arguments for a ``slurm`` or ``pbs`` entry (TLS aside)."""
    options = {
        name: _plain(cfg[name])
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
    scheduler = {"dashboard_address": _dashboard(cfg)}
    # the scheduler's dashboard is the sweep's; a worker's own would only slow its start
    options["worker_extra_args"] = ["--no-dashboard"]
    if cfg.host:
        scheduler["host"] = cfg.host
        options["worker_extra_args"] += ["--host", cfg.host]
    options["job_script_prologue"] = [
        *(options["job_script_prologue"] or []),
        *(
            f"export DASK_{key.upper().replace('.', '__')}={value}"
            for key, value in IN_MEMORY.items()
        ),
    ]
    for name, size in (_memory_resource(cfg) or {}).items():
        options["worker_extra_args"] += ["--resources", f"{name}={size}"]
    return {**options, "scheduler_options": scheduler}


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


def _start(cfg, security: Security | None):
    """A new cluster for ``cfg.kind`` (not ``address``) and how to scale it back to its size."""
    if cfg.kind == "local":
        cluster = LocalCluster(
            n_workers=cfg.n_workers,
            threads_per_worker=cfg.threads_per_worker,
            processes=True,
            memory_limit=cfg.memory_limit,
            host=cfg.host,
            dashboard_address=_dashboard(cfg),
            protocol="tls://" if security else None,
            security=security,
            resources=_memory_resource(cfg),
        )
        size = len(cluster.worker_spec)
        return cluster, lambda: cluster.scale(size)
    if cfg.kind in ("slurm", "pbs"):
        jobqueue = _optional("dask_jobqueue", "jobqueue", cfg.kind)
        cls = jobqueue.SLURMCluster if cfg.kind == "slurm" else jobqueue.PBSCluster
        submit = cls.job_cls.submit_command
        if shutil.which(submit) is None:
            raise ConfigError(
                "cluster", f"cluster={cfg.kind} needs {submit} on PATH (a {cfg.kind} login node)"
            )
        cluster = cls(**jobqueue_options(cfg), security=security)
        try:
            cluster.sync(_submit, cluster, cfg.jobs)
        except BaseException:
            # SpecCluster cannot close a job that was never submitted (it asserts on
            # its state); close what it can, the caller reports the refusal.
            with contextlib.suppress(Exception):
                cluster.close()
            raise
        return cluster, lambda: cluster.scale(jobs=cfg.jobs)
    if cfg.kind == "ssh":
        _optional("asyncssh", "ssh", "ssh")
        from distributed import SSHCluster

        listen = {"host": cfg.host} if cfg.host else {}
        cluster = SSHCluster(
            list(cfg.hosts),
            connect_options=_plain(cfg.connect_options),
            worker_options={
                "n_workers": cfg.workers_per_host,
                "nthreads": cfg.threads_per_worker,
                **listen,
            },
            scheduler_options={
                "dashboard_address": _dashboard(cfg),
                **listen,
                **({"protocol": "tls"} if security else {}),
            },
            remote_python=cfg.remote_python,
            security=security,
        )
        size = len(cluster.worker_spec)
        return cluster, lambda: cluster.scale(size)
    raise ConfigError("cluster.kind", f"unknown kind {cfg.kind!r}")


def _why(error: BaseException) -> str:
    """One line from the innermost cause of ``error`` (e.g. sbatch's own message)."""
    while error.__cause__ is not None:
        error = error.__cause__
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else ''}"[:300]


@contextlib.contextmanager
def _kept(cluster, resize) -> Iterator[None]:
    """Scale ``cluster`` back to its size every ``KEEP_SECONDS`` (on its event loop), until
    the block ends: stopped before the cluster closes, so closing never races a new worker."""
    callback = PeriodicCallback(resize, KEEP_SECONDS * 1000)
    cluster.loop.add_callback(callback.start)
    try:
        yield
    finally:
        stopped = threading.Event()

        def stop() -> None:
            callback.stop()
            stopped.set()

        cluster.loop.add_callback(stop)
        stopped.wait(KEEP_SECONDS)


async def _handshake(address: str, timeout: float, connection_args: dict) -> bool:
    """Whether what listens at ``address`` answers distributed's handshake within ``timeout``
    seconds (False: it accepted the connection and stayed silent); OSError where nothing
    accepts the connection."""
    try:
        comm = await asyncio.wait_for(
            comm_connect(address, timeout=timeout, **connection_args), timeout + ANSWER_GRACE
        )
    except TimeoutError:
        return False
    await comm.close()
    return True


def _answers(address: str, timeout: float, security: Security | None) -> bool:
    """``_handshake`` on an event loop of its own, in a thread (the caller's loop may be
    running, as in a notebook). ``Client`` cannot tell: it waits for the handshake forever."""
    connection_args = security.get_connection_args("client") if security else {}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _handshake(address, timeout, connection_args)).result()


def _first_worker(client: Client, cfg) -> None:
    try:
        client.wait_for_workers(1, timeout=cfg.wait_for_workers)
    except TimeoutError:
        raise NoWorkers(
            f"no Dask worker connected within {cfg.wait_for_workers:g} s (cluster.wait_for_workers)"
        ) from None


@contextlib.contextmanager
def connect(cfg, *, allowed_failures: int = 3, log_file: Path | None = None) -> Iterator[Client]:
    """A client of the cluster ``cfg`` describes, with at least one worker.

    A started cluster is closed on exit (its batch jobs cancelled). An
    ``address`` no scheduler answers within ``cfg.timeout`` seconds (nothing accepts the
    connection, or what does is no Dask scheduler), or a cluster that cannot start, raises
    ``ConfigError``; no worker within
    ``cfg.wait_for_workers`` seconds raises ``NoWorkers``. A task that
    ``allowed_failures`` + 1 workers died running (out of memory, most often) fails
    with ``KilledWorker`` rather than being run again and again (a scheduler this
    does not start keeps its own setting). The workers it starts never spill results to
    disk (``IN_MEMORY``); a local cluster's log to ``log_file`` (``logs.WorkerLog``).
    """
    settings = {
        "distributed.deploy.lost-worker-timeout": LOST_WORKER_TIMEOUT,
        "distributed.scheduler.allowed-failures": allowed_failures,
        **IN_MEMORY,
    }
    with tls(cfg) as tls_config, dask.config.set({**settings, **tls_config}):
        security = Security() if tls_config else None
        if cfg.kind == "address":
            try:
                if not _answers(cfg.address, cfg.timeout, security):
                    raise ConfigError(
                        "cluster.address",
                        f"{cfg.address} accepted a connection but did not answer as a Dask "
                        f"scheduler within {cfg.timeout:g} s; allowed: a Dask scheduler's "
                        "address (`dask scheduler` prints it)",
                    )
                client = Client(cfg.address, timeout=cfg.timeout, security=security)
            except (OSError, TimeoutError) as error:
                raise ConfigError(
                    "cluster.address",
                    f"no Dask scheduler answered at {cfg.address} within {cfg.timeout:g} s "
                    f"({type(error).__name__}); start one with `dask scheduler` or fix the "
                    "address" + (" or cluster.security" if security else ""),
                ) from None
            with client:
                _first_worker(client, cfg)
                yield client
            return
        try:
            cluster, resize = _start(cfg, security)
        except (OSError, RuntimeError, TimeoutError) as error:
            raise ConfigError(
                "cluster", f"cluster={cfg.kind} did not start: {_why(error)}"
            ) from None
        nannies = logging.getLogger("distributed.nanny")
        with contextlib.ExitStack() as stack:  # left in reverse order
            stack.callback(nannies.setLevel, nannies.level)
            stack.enter_context(cluster)
            # while the cluster closes, a nanny stopping a worker still busy with a cancelled
            # task (an interrupted sweep) is expected: no "still alive, killing" warning
            stack.callback(nannies.setLevel, logging.ERROR)
            stack.enter_context(_kept(cluster, resize))
            client = stack.enter_context(Client(cluster, security=security))
            _first_worker(client, cfg)
            if cfg.kind == "local":
                client.register_plugin(WorkerLog(log_file))
            yield client


def worker_memory(cfg) -> int | None:
    """The memory limit of each worker the cluster ``cfg`` will start, in bytes, as
    distributed sets it; None where only the running cluster can tell (``address``, ``ssh``)."""
    if cfg.kind == "local":
        cores = os.cpu_count() or 1
        threads = cfg.threads_per_worker or max(1, cores // (cfg.n_workers or cores))
        return parse_memory_limit(cfg.memory_limit, threads, cores, logger=log)
    if cfg.kind in ("slurm", "pbs"):
        return int(parse_bytes(cfg.memory) / cfg.processes)
    return None


def _memory_resource(cfg) -> dict[str, int] | None:
    """The ``MEMORY`` resource the workers of ``cfg`` declare (None: no memory limit)."""
    limit = worker_memory(cfg)
    return {MEMORY: limit} if limit else None


def memory_resource(client: Client) -> int | None:
    """The smallest ``MEMORY`` resource of the client's workers; None unless every worker
    declares it (a cluster this sweep did not start need not)."""
    found = [
        w.get("resources", {}).get(MEMORY) for w in client.scheduler_info()["workers"].values()
    ]
    return min(found) if found and all(found) else None


def running_worker_memory(client: Client) -> int | None:
    """The smallest memory limit of the client's workers (None: none is limited)."""
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
    limits = [limit for limit in limits if limit]
    return min(limits) if limits else None


def dashboard_link(client: Client, cfg) -> str:
    """The dashboard's address as it is served: the host it is bound to where that is one
    address, else the scheduler's; 'none' when the scheduler serves no dashboard."""
    port = client.scheduler_info()["services"].get("dashboard")
    if port is None:
        return "none (the scheduler serves no dashboard)"
    host = client.scheduler.address.split("://")[-1].rsplit(":", 1)[0]
    if cfg.kind != "address":
        bound = _dashboard(cfg).rsplit(":", 1)[0]
        host = bound if bound not in ("", "0.0.0.0") else host
    return format_dashboard_link(host, port)


class WorkerWatch:
    """Called often during the sweep: raises ``NoWorkers`` once the client has had no worker
    for ``timeout`` seconds (all lost and none replaced). Asks the scheduler once a second."""

    def __init__(self, client: Client, timeout: float):
        self.client, self.timeout = client, timeout
        self._checked, self._seen = float("-inf"), time.monotonic()

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self._checked < 1.0:
            return
        self._checked = now
        if self.client.nthreads():
            self._seen = now
        elif now - self._seen >= self.timeout:
            raise NoWorkers(
                f"no Dask worker for {self.timeout:g} s: every worker was lost and none "
                "replaced (cluster.wait_for_workers)"
            )
