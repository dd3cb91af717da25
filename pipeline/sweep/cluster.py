"""Dask clusters from ``dask_cluster.yaml`` entries: start or connect, then close.

The sweep's entry point makes the client here and passes it down; nothing
else in the pipeline creates one.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator

from distributed import Client, LocalCluster

from pipeline.sweep.config import ConfigError


def _optional(module: str, extra: str, kind: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            "cluster",
            f"cluster={kind} needs {module.split('.')[0]}: pip install 'topp-pipeline[{extra}]'",
        ) from None


def _start(cfg):
    """A new cluster for ``cfg.kind`` (not ``address``)."""
    if cfg.kind == "local":
        return LocalCluster(
            n_workers=cfg.n_workers,
            threads_per_worker=cfg.threads_per_worker,
            processes=True,
            memory_limit=cfg.memory_limit,
            dashboard_address=cfg.dashboard_address,
        )
    if cfg.kind in ("slurm", "pbs"):
        jobqueue = _optional("dask_jobqueue", "jobqueue", cfg.kind)
        cls = jobqueue.SLURMCluster if cfg.kind == "slurm" else jobqueue.PBSCluster
        options = {
            k: cfg[k]
            for k in (
                "cores",
                "processes",
                "memory",
                "walltime",
                "queue",
                "account",
                "job_extra_directives",
                "job_script_prologue",
                "local_directory",
            )
        }
        cluster = cls(**{k: (list(v) if k.startswith("job_") else v) for k, v in options.items()})
        cluster.scale(jobs=cfg.jobs)
        return cluster
    if cfg.kind == "ssh":
        _optional("asyncssh", "ssh", "ssh")
        from distributed import SSHCluster

        return SSHCluster(
            list(cfg.hosts),
            connect_options=dict(cfg.connect_options),
            worker_options={"n_workers": cfg.workers_per_host, "nthreads": cfg.threads_per_worker},
            remote_python=cfg.remote_python,
        )
    raise ConfigError("cluster.kind", f"unknown kind {cfg.kind!r}")


@contextlib.contextmanager
def connect(cfg) -> Iterator[Client]:
    """A client of the cluster ``cfg`` describes; started clusters are closed on exit.

    An ``address`` that no scheduler answers within ``cfg.timeout`` seconds
    raises ``ConfigError``.
    """
    if cfg.kind == "address":
        try:
            client = Client(cfg.address, timeout=cfg.timeout)
        except (OSError, TimeoutError) as error:
            raise ConfigError(
                "cluster.address",
                f"no Dask scheduler answered at {cfg.address} within {cfg.timeout:g} s "
                f"({type(error).__name__}); start one with `dask scheduler` or fix the address",
            ) from None
        with client:
            yield client
        return
    with _start(cfg) as cluster, Client(cluster) as client:
        yield client
