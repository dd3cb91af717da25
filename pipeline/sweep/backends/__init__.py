"""Cluster back-ends, one small object per kind of ``dask_cluster.yaml`` entry: ``local``
(``LocalCluster``), ``address`` (a running scheduler), ``slurm`` and ``pbs`` (batch jobs
through dask-jobqueue), ``ssh`` (hosts over SSH). Each holds its schema, its checks, how it
starts (or connects to) its cluster and its workers' memory (``base.Backend``); the sweep
looks a kind up in ``BACKENDS`` and asks nothing else of it.
"""

from pipeline.sweep.backends.address import Address
from pipeline.sweep.backends.base import MEMORY, Backend, NoWorkers, SecurityConfig
from pipeline.sweep.backends.jobqueue import Jobqueue
from pipeline.sweep.backends.local import Local
from pipeline.sweep.backends.ssh import SSH

BACKENDS: dict[str, Backend] = {
    backend.kind: backend
    for backend in (
        Local(),
        Address(),
        Jobqueue("slurm", "SLURMCluster", days=True),
        Jobqueue("pbs", "PBSCluster", days=False),
        SSH(),
    )
}
"""Cluster kind (an entry's ``kind`` key) -> its back-end."""

__all__ = ["BACKENDS", "MEMORY", "Backend", "NoWorkers", "SecurityConfig"]
