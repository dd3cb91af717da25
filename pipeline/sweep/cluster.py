"""Dask clusters from ``dask_cluster.yaml`` entries: start or connect, keep, close.

The sweep's entry point makes the client here and passes it down; nothing
else in the pipeline creates one. Each kind of entry is a back-end
(``pipeline.sweep.backends``). A cluster started here listens where its
entry says (``host``, ``dashboard_address``: loopback for a local cluster),
is scaled back to its size while the sweep runs, so a lost worker or batch job
is replaced, and is closed on exit, which cancels a jobqueue cluster's jobs.
An entry's ``security`` turns on TLS with mutual authentication: certificate
files of your own, or a temporary certificate authority for this sweep alone, which a
scheduler that listens beyond loopback gets unless the entry turns it off.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import dask
from distributed import Client, Security
from distributed.utils import format_dashboard_link

from pipeline.environment import WORKER_ENVIRONMENT
from pipeline.sweep.backends import BACKENDS, NoWorkers
from pipeline.sweep.backends.base import IN_MEMORY, MEMORY, dashboard
from pipeline.sweep.config.clusters import certificate_directory, temporary_tls

log = logging.getLogger("pipeline.sweep")

LOST_WORKER_TIMEOUT = "3s"
"""How long a started cluster waits for a lost worker to come back before replacing it."""


def tls_settings(ca_file: str | Path, cert: str | Path, key: str | Path | None) -> dict:
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
def tls(entry) -> Iterator[dict]:
    """Dask's TLS settings for the cluster ``entry`` ({} when TLS is off): a temporary
    certificate authority's (``temporary_tls``: asked for, or a scheduler that listens beyond
    loopback) or the files of ``entry.security``."""
    security = entry.security
    if temporary_tls(entry):
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


@contextlib.contextmanager
def connect(entry, *, allowed_failures: int = 3, log_file: Path | None = None) -> Iterator[Client]:
    """A client of the cluster ``entry`` describes, with at least one worker: its back-end's
    (``pipeline.sweep.backends``), with TLS where ``entry`` turns it on.

    A started cluster is closed on exit (its batch jobs cancelled). An
    ``address`` no scheduler answers within ``entry.timeout`` seconds (nothing accepts the
    connection, or what does is no Dask scheduler), or a cluster that cannot start, raises
    ``ConfigError``; no worker within ``entry.wait_for_workers`` seconds raises ``NoWorkers``.
    A task that ``allowed_failures`` + 1 workers died running (out of memory, most often)
    fails with ``KilledWorker`` rather than being run again and again (a scheduler this
    does not start keeps its own setting). The workers it starts never spill results to
    disk (``IN_MEMORY``) and begin with ``WORKER_ENVIRONMENT`` in their environment; a local
    cluster's log to ``log_file`` (``logs.WorkerLog``).
    """
    environment = dask.config.get("distributed.nanny.pre-spawn-environ")
    settings = {
        "distributed.nanny.pre-spawn-environ": {**environment, **WORKER_ENVIRONMENT},
        "distributed.deploy.lost-worker-timeout": LOST_WORKER_TIMEOUT,
        "distributed.scheduler.allowed-failures": allowed_failures,
        **IN_MEMORY,
    }
    with tls(entry) as tls_config, dask.config.set({**settings, **tls_config}):
        security = Security() if tls_config else None
        with BACKENDS[entry.kind].client(entry, security, log_file) as client:
            yield client


def worker_memory(entry) -> int | None:
    """The memory limit of each worker the cluster ``entry`` will start, in bytes, as
    distributed sets it; None where only the running cluster can tell (``address``, ``ssh``)."""
    return BACKENDS[entry.kind].worker_memory(entry)


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


def dashboard_link(client: Client, entry) -> str:
    """The dashboard's address as it is served: the host it is bound to where that is one
    address, else the scheduler's; 'none' when the scheduler serves no dashboard."""
    port = client.scheduler_info()["services"].get("dashboard")
    if port is None:
        return "none (the scheduler serves no dashboard)"
    scheduler = client.scheduler
    assert scheduler is not None and scheduler.address is not None, "a connected client"
    host = scheduler.address.split("://")[-1].rsplit(":", 1)[0]
    if BACKENDS[entry.kind].starts_scheduler:
        bound = dashboard(entry).rsplit(":", 1)[0]
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
