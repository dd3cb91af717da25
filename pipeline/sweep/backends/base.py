"""What every cluster back-end shares: the ``Backend`` interface, the ``security`` section,
and the start, keep and close of a cluster the sweep starts.

A back-end is one small object per cluster kind (``pipeline.sweep.backends.BACKENDS``): its
schema (the keys of its ``dask_cluster.yaml`` entries), its own checks, how it starts a
cluster (or connects to one), and how much memory its workers have. Nothing outside the
back-ends asks which kind a cluster is.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Optional

from distributed import Client, Security
from distributed.deploy import Cluster
from omegaconf import OmegaConf
from tornado.ioloop import PeriodicCallback

from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.logs import WorkerLog

MEMORY = "MEMORY"
"""The worker resource a started cluster declares, its memory limit in bytes: a large cell's
tasks reserve their estimate of it, so two that would not fit side by side never share a
worker."""
KEEP_SECONDS = 2.0
"""How often a started cluster is scaled back to its size (replacing lost workers)."""
IN_MEMORY = {"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False}
"""A started cluster's workers keep task results in memory, never spilled to disk: a sweep's
results are models and approximations that its running tasks hold, so spilling one frees
nothing and reading it back makes a second copy (distributed spills from 70% of a worker's
memory, which a 10^7-state cell passes), whose arrays may come back unaligned, which numpy
sums in other blocks (a stored mean moved by 2e-15). Pausing at 80% and restarting at 95%
stay."""


class NoWorkers(RuntimeError):
    """No worker was connected for ``wait_for_workers`` seconds."""


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


def plain(value):
    """A config value as plain Python (lists and dicts, not OmegaConf nodes)."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def optional_module(module: str, extra: str, kind: str):
    """``module``, or ``ConfigError`` naming the extra that installs it (from a clone: the
    package is on no index)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            "cluster",
            f"cluster={kind} needs {module.split('.')[0]}: pip install -e '.[{extra}]' in the "
            "clone of pipeline",
        ) from None


def dashboard(entry) -> str:
    """``dashboard_address`` with ``host`` filled in for a bare ``:port``."""
    address = entry.dashboard_address
    return f"{entry.host}{address}" if address.startswith(":") and entry.host else address


def first_worker(client: Client, entry) -> None:
    """Wait for a worker, or raise ``NoWorkers`` after ``wait_for_workers`` seconds."""
    try:
        client.wait_for_workers(1, timeout=entry.wait_for_workers)
    except TimeoutError:
        raise NoWorkers(
            f"no Dask worker connected within {entry.wait_for_workers:g} s "
            "(cluster.wait_for_workers)"
        ) from None


def why(error: BaseException) -> str:
    """One line from the innermost cause of ``error`` (e.g. sbatch's own message)."""
    while error.__cause__ is not None:
        error = error.__cause__
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else ''}"[:300]


@contextlib.contextmanager
def _kept(cluster, resize: Callable[[], None]) -> Iterator[None]:
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


class Backend:
    """A cluster kind: ``kind`` (the entries' ``kind`` key), ``schema`` (the dataclass of an
    entry's keys, its numbers' ranges declared on its fields: ``validation.ranged``),
    ``starts_scheduler`` (false for a scheduler the sweep connects to), ``shares_terminal``
    (its workers write to the sweep's terminal: a local cluster's), and what differs from
    kind to kind: ``validate``, ``worker_memory`` and ``start`` (or ``client`` as a whole)."""

    kind: str
    schema: type
    starts_scheduler = True
    shares_terminal = False

    def validate(self, entry, tls: bool) -> None:
        """Raise ``ConfigError`` naming the first invalid key of this kind's own, beyond the
        ranges of its schema (``tls``: whether the entry's security turns TLS on)."""

    def worker_memory(self, entry) -> int | None:
        """The memory limit of each worker the cluster will have, in bytes; None where only
        the running cluster can tell."""
        return None

    def start(self, entry, security: Security | None) -> tuple[Cluster, Callable[[], None]]:
        """A new cluster for ``entry`` and how to scale it back to its size."""
        raise NotImplementedError

    @contextlib.contextmanager
    def client(self, entry, security: Security | None, log_file=None) -> Iterator[Client]:
        """A client of a cluster started for ``entry`` with at least one worker, closed on exit
        (its batch jobs cancelled); kept at its size meanwhile, lost workers replaced."""
        try:
            cluster, resize = self.start(entry, security)
        except (OSError, RuntimeError, TimeoutError) as error:
            raise ConfigError(
                "cluster", f"cluster={entry.kind} did not start: {why(error)}"
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
            first_worker(client, entry)
            if self.shares_terminal:
                client.register_plugin(WorkerLog(log_file))
            yield client

    def memory_resource(self, entry) -> dict[str, int] | None:
        """The ``MEMORY`` resource the workers of ``entry`` declare (None: no memory limit)."""
        limit = self.worker_memory(entry)
        return {MEMORY: limit} if limit else None
