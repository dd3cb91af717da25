"""Cluster settings in this process: job scripts, loopback binding, TLS, lost workers, errors."""

import os
import socket
import ssl
import tempfile
import urllib.request

import dask
import kit
import psutil
import pytest
from dask_jobqueue import PBSCluster, SLURMCluster
from distributed import Client, LocalCluster, Security
from omegaconf import OmegaConf

from pipeline.sweep.backends import BACKENDS, NoWorkers, SecurityConfig
from pipeline.sweep.backends.address import AddressClusterConfig
from pipeline.sweep.backends.jobqueue import JobqueueClusterConfig
from pipeline.sweep.backends.local import LocalClusterConfig
from pipeline.sweep.backends.ssh import SSHClusterConfig
from pipeline.sweep.cluster import (
    WORKER_ENVIRONMENT,
    WorkerWatch,
    connect,
    dashboard_link,
    memory_resource,
    tls,
    worker_memory,
)
from pipeline.sweep.config import ConfigError

JOB = JobqueueClusterConfig(
    jobs=3,
    cores=4,
    processes=2,
    memory="6GiB",
    walltime="1-02:03:04",
    queue="short",
    account="proj42",
    job_extra_directives=["--exclusive"],
    job_script_prologue=["module load python/3.11", "source /opt/venv/bin/activate"],
    local_directory="$TMPDIR",
    host="127.0.0.1",
    dashboard_address=":0",
    death_timeout=7,
)


def script(kind: str, **changes) -> str:
    """The job script dask-jobqueue writes for ``JOB`` as ``kind`` (with TLS if asked)."""
    cfg = OmegaConf.structured(JobqueueClusterConfig(**{**vars(JOB), "kind": kind, **changes}))
    cls = SLURMCluster if kind == "slurm" else PBSCluster
    with tls(cfg) as settings, dask.config.set(settings):
        security = Security() if settings else None
        with cls(**BACKENDS[kind].options(cfg), security=security) as cluster:
            return cluster.job_script()


def test_settings_reach_the_slurm_job_script():
    text = script("slurm")
    for line in (
        "#SBATCH -p short",
        "#SBATCH -A proj42",
        "#SBATCH -n 1",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --mem=6G",
        "#SBATCH -t 1-02:03:04",
        "#SBATCH --exclusive",
        "module load python/3.11",
        "source /opt/venv/bin/activate",
        "export DASK_DISTRIBUTED__WORKER__MEMORY__TARGET=False",
        "export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}",
        "export DASK_DISTRIBUTED__WORKER__MEMORY__SPILL=False",
    ):
        assert f"\n{line}\n" in text, line
    assert text.index("source /opt/venv/bin/activate") < text.index("distributed.cli.dask_worker")
    assert dask.config.collect_env({"DASK_DISTRIBUTED__WORKER__MEMORY__SPILL": "False"}) == {
        "distributed": {"worker": {"memory": {"spill": False}}}
    }  # read as False, not "False"
    worker = text.splitlines()[-1]
    for argument in ("--nworkers 2", "--nthreads 2", "--memory-limit 3.00GiB"):
        assert argument in worker, argument
    for argument in ("--local-directory $TMPDIR", "--death-timeout 7", "--host 127.0.0.1"):
        assert argument in worker, argument
    assert "tcp://127.0.0.1:" in worker


def test_settings_reach_the_pbs_job_script_and_tls_its_worker():
    text = script(
        "pbs",
        walltime="02:03:04",
        job_extra_directives=["-l place=excl"],
        security=SecurityConfig(temporary=True),
    )
    for line in (
        "#PBS -q short",
        "#PBS -A proj42",
        "#PBS -l select=1:ncpus=4:mem=6144MB",
        "#PBS -l walltime=02:03:04",
        "#PBS -l place=excl",
        "module load python/3.11",
    ):
        assert f"\n{line}\n" in text, line
    worker = text.splitlines()[-1]
    assert "tls://127.0.0.1:" in worker
    for option in ("--tls-ca-file", "--tls-cert", "--tls-key"):  # never in the working directory
        assert f"{option} {tempfile.gettempdir()}/.dask-tls-" in worker, option
    assert "PRIVATE KEY" not in text  # the script names the key file, never its contents


def listening(process: psutil.Process) -> set[str]:
    """The addresses ``process`` and its children listen on."""
    found = set()
    for each in [process, *process.children(recursive=True)]:
        for connection in each.net_connections(kind="tcp"):
            if connection.status == psutil.CONN_LISTEN:
                found.add(connection.laddr.ip)
    return found


def test_a_local_cluster_listens_on_loopback_and_links_its_real_dashboard():
    """A local cluster listens on loopback, links its dashboard, and its workers begin with
    ``WORKER_ENVIRONMENT`` in their environment."""
    cfg = OmegaConf.structured(LocalClusterConfig(n_workers=1, dashboard_address=":0"))
    with connect(cfg) as client:
        found = client.run(lambda: {key: os.environ.get(key) for key in WORKER_ENVIRONMENT})
        assert list(found.values()) == [WORKER_ENVIRONMENT]
        assert client.scheduler.address.startswith("tcp://127.0.0.1:")
        assert all(a.startswith("tcp://127.0.0.1:") for a in client.scheduler_info()["workers"])
        assert listening(psutil.Process()) == {"127.0.0.1"}
        link = dashboard_link(client, cfg)
        assert link.startswith("http://127.0.0.1:") and not link.startswith("http://127.0.0.1:0/")
        with urllib.request.urlopen(link, timeout=10) as response:
            assert response.status == 200


@pytest.mark.parametrize(
    "layout",
    [{"n_workers": 1, "threads_per_worker": None}, {"n_workers": None, "threads_per_worker": None}],
    ids=["one_worker_every_core", "distributeds_split"],
)
def test_the_memory_the_sweep_expects_is_what_each_local_worker_gets(layout):
    """The memory check before a cluster starts and the ``MEMORY`` resource read a worker's
    limit from the entry (threads per worker as ``LocalCluster`` shares out the cores)."""
    cfg = OmegaConf.structured(LocalClusterConfig(dashboard_address=":0", **layout))
    expected = worker_memory(cfg)
    with connect(cfg) as client:
        started = len(client.cluster.worker_spec)
        kit.wait_until(lambda: len(client.nthreads()) == started, 60, "every worker")
        workers = client.scheduler_info()["workers"].values()
        assert {w["memory_limit"] for w in workers} == {expected}
        assert memory_resource(client) == expected


def tls_exchange(address: str, ca_file: str, cert: str | None = None) -> bytes:
    """Open a raw TLS connection to a Dask ``tls://`` address, trusting ``ca_file`` and
    presenting ``cert`` (with its key) if given; return the first byte the server sends."""
    host, port = address.split("://")[1].rsplit(":", 1)
    context = ssl.create_default_context(cafile=ca_file)
    context.check_hostname = False
    if cert:
        context.load_cert_chain(cert, dask.config.get("distributed.comm.tls.client.key"))
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with context.wrap_socket(raw) as connection:
            connection.sendall(b"\0" * 8)
            connection.settimeout(1)
            try:
                return connection.recv(1)
            except TimeoutError:
                return b"accepted"  # the server waits for a Dask message: it let us in


def test_a_tls_cluster_refuses_clients_without_its_certificates():
    cfg = OmegaConf.structured(
        LocalClusterConfig(n_workers=1, dashboard_address=":0", security=SecurityConfig(True))
    )
    with connect(cfg) as client:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        assert client.submit(sum, [1, 2]).result(timeout=30) == 3
        ca_file = dask.config.get("distributed.comm.tls.ca-file")
        cert = dask.config.get("distributed.comm.tls.client.cert")
        assert tls_exchange(address, ca_file, cert)  # with the certificate: let in
        with pytest.raises(OSError):  # trusts the authority but shows no certificate
            tls_exchange(address, ca_file)
        outsider = {  # none of this sweep's TLS settings
            "distributed.comm.require-encryption": False,
            "distributed.comm.tls.ca-file": None,
            "distributed.comm.tls.client.cert": None,
            "distributed.comm.tls.client.key": None,
        }
        with dask.config.set(outsider):
            plain, stranger = address.replace("tls://", "tcp://"), Security.temporary()
            for where, security in ((plain, None), (address, stranger)):
                with pytest.raises((OSError, TimeoutError)):
                    Client(where, security=security, timeout=2)
                    pytest.fail(f"a client joined at {where} with {security}")


def test_address_with_certificate_files(tmp_path):
    generated = Security.temporary()
    files = {
        "ca_file": generated.tls_ca_file,
        "cert": generated.tls_scheduler_cert,
        "key": generated.tls_scheduler_key,
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    security = SecurityConfig(**{name: str(tmp_path / name) for name in files})
    cfg = OmegaConf.structured(AddressClusterConfig(security=security))
    with tls(cfg) as settings, dask.config.set(settings):
        scheduler = LocalCluster(
            n_workers=1,
            host="127.0.0.1",
            protocol="tls://",
            dashboard_address="127.0.0.1:0",
            security=Security(),
        )
    with scheduler:
        cfg.address = scheduler.scheduler_address
        with connect(cfg) as client:
            assert client.submit(sum, [2, 3]).result(timeout=30) == 5


def test_no_worker_is_a_one_line_error():
    with LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0") as empty:
        cfg = OmegaConf.structured(
            AddressClusterConfig(address=empty.scheduler_address, wait_for_workers=1)
        )
        with pytest.raises(NoWorkers, match=r"^no Dask worker connected within 1 s"), connect(cfg):
            pass


def test_a_watch_stops_a_sweep_whose_workers_are_all_gone():
    with LocalCluster(n_workers=1, host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster:
        with Client(cluster) as client:
            watch = WorkerWatch(client, timeout=1)
            watch()  # a worker: nothing to say
            cluster.scale(0)
            kit.wait_until(lambda: not client.nthreads(), 30, "the worker to leave")
            with pytest.raises(NoWorkers, match="every worker was lost and none replaced"):
                kit.wait_until(lambda: watch() or False, 10, "the watch to give up")


def test_unreachable_ssh_hosts_are_one_line_errors(sshd):
    nobody = kit.free_port()
    stranger = {**sshd.connect_options, "client_keys": [], "agent_path": None}
    for options, expected in (
        ({**sshd.connect_options, "port": nobody}, f"Connect call failed ('127.0.0.1', {nobody})"),
        (stranger, "PermissionDenied: Permission denied"),
    ):
        cfg = OmegaConf.structured(
            SSHClusterConfig(hosts=["127.0.0.1"] * 2, connect_options=options)
        )
        with pytest.raises(ConfigError) as error, connect(cfg):
            pass
        message = str(error.value)
        assert message.startswith("cluster: cluster=ssh did not start: ") and "\n" not in message
        assert expected in message, message
