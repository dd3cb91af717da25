"""Safe cluster defaults, in this process: TLS wherever the scheduler listens beyond loopback,
its temporary certificates outside the working directory and gone at exit (a SIGTERM
included), a ``cluster.address`` that does not answer as a Dask scheduler stopping the
sweep within its timeout, before the store is written, worker counts and memory limits
bounded before any cluster starts, and asyncssh's free ``connect_options``. Real TLS
clusters: ``tests/clusters``.
"""

import contextlib
import os
import signal
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path

import dask
import pytest
import yaml
from dask.system import CPU_COUNT
from dask.utils import format_bytes
from distributed import Security, system
from omegaconf import OmegaConf

from pipeline.sweep.backends.address import ANSWER_GRACE
from pipeline.sweep.backends.base import plain
from pipeline.sweep.backends.local import MEMORY_LIMITS, MIN_WORKER_MEMORY
from pipeline.sweep.cluster import tls
from pipeline.sweep.config import SHIPPED_CLUSTERS, ConfigError, compose, register
from pipeline.sweep.config.clusters import load_clusters, temporary_tls
from pipeline.sweep.engine import sweep
from pipeline.sweep.main import _stop, check_overrides
from pipeline.sweep.provenance import REDACTED, public_config

from sweeping import composed

TEMPORARY_TLS = {
    (): {
        "local": False,
        "machine": False,
        "address": False,
        "slurm": True,
        "pbs": True,
        "ssh": True,
    },
    ("cluster.security.temporary=false",): {"slurm": False, "pbs": False, "ssh": False},
    ("cluster.host=127.0.0.1",): {"slurm": False, "pbs": False, "ssh": False, "local": False},
    ("cluster.host=localhost",): {"slurm": False, "local": False},
    ("cluster.host=0.0.0.0",): {"local": True, "machine": True, "ssh": True},
    ("cluster.host=10.1.2.3",): {"slurm": True, "local": True},
    ("cluster.host=login1.example.org",): {"pbs": True},
    ("cluster.interface=ib0",): {"slurm": True, "pbs": True},
    ("cluster.security.temporary=true",): {"local": True, "machine": True},
}
"""Overrides -> whether each cluster entry gets a temporary certificate authority."""


ENTRIES = load_clusters(SHIPPED_CLUSTERS)


def entry(name: str, *overrides: str):
    """The repository's cluster entry ``name`` with ``cluster.key=value`` overrides."""
    changes = OmegaConf.from_dotlist([o.removeprefix("cluster.") for o in overrides])
    return OmegaConf.merge(OmegaConf.structured(ENTRIES[name]), changes)


@pytest.mark.parametrize("overrides", sorted(TEMPORARY_TLS))
def test_tls_is_on_where_the_scheduler_listens_beyond_loopback(overrides):
    for name, expected in TEMPORARY_TLS[overrides].items():
        assert temporary_tls(entry(name, *overrides)) is expected, name


def test_certificate_files_of_ones_own_replace_the_temporary_authority(tmp_path):
    generated = Security.temporary()
    (tmp_path / "ca.pem").write_text(generated.tls_ca_file)
    (tmp_path / "dask.pem").write_text(generated.tls_scheduler_cert + generated.tls_scheduler_key)
    cfg = entry(
        "slurm", f"security.ca_file={tmp_path}/ca.pem", f"security.cert={tmp_path}/dask.pem"
    )
    assert not temporary_tls(cfg)
    with tls(cfg) as settings:
        assert settings["distributed.comm.tls.ca-file"] == f"{tmp_path}/ca.pem"


@contextlib.contextmanager
def temporary_folder(cfg):
    """The private directory ``tls`` writes the temporary certificates of ``cfg`` to."""
    with tls(cfg) as settings:
        yield Path(settings["distributed.comm.tls.ca-file"]).parent, settings


def test_temporary_certificates_live_in_a_private_directory_outside_the_working_one(
    tmp_path, monkeypatch
):
    cfg = entry("ssh")  # every interface: TLS by default
    monkeypatch.chdir(tmp_path)
    with temporary_folder(cfg) as (folder, settings):
        assert folder.parent == Path(tempfile.gettempdir()) and folder.name.startswith(".dask-tls-")
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert sorted(p.name for p in folder.iterdir()) == ["ca_file.pem", "cert.pem", "key.pem"]
        assert stat.S_IMODE((folder / "key.pem").stat().st_mode) == 0o600
        assert "PRIVATE KEY" in (folder / "key.pem").read_text()
        assert list(tmp_path.iterdir()) == []
        with dask.config.set(settings):  # the files make the TLS contexts of every role
            for role in ("client", "scheduler", "worker"):
                assert Security().get_connection_args(role)["ssl_context"] is not None
    assert not folder.exists()


def test_temporary_certificates_go_to_the_directory_asked_for(tmp_path, monkeypatch):
    with temporary_folder(entry("slurm")) as (folder, _):  # batch jobs' nodes share $HOME
        assert folder.parent == Path.home() and folder.name.startswith(".dask-tls-")
    assert not folder.exists()
    monkeypatch.setenv("SHARED", str(tmp_path))
    cfg = entry("pbs", "security.directory=$SHARED")
    with temporary_folder(cfg) as (folder, _):
        assert folder.parent == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_a_sigterm_removes_the_temporary_certificates():
    """The command line turns SIGTERM into an interrupt (``main._stop``), which unwinds
    through ``tls``; a SIGKILL leaves them where the system cleans."""
    cfg = entry("ssh")
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        with pytest.raises(KeyboardInterrupt), temporary_folder(cfg) as (folder, _):
            assert folder.is_dir()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the handler interrupts this at once
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not folder.exists()


@contextlib.contextmanager
def silent_listener():
    """A TCP listener on 127.0.0.1 that accepts every connection and never sends a byte:
    its port and the connections it accepted."""
    accepted, stop = [], threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.1)

        def accept() -> None:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    accepted.append(server.accept()[0])

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield server.getsockname()[1], accepted
        finally:
            stop.set()
            thread.join()
            for connection in accepted:
                connection.close()


def stopped_sweep(store: Path, address: str) -> tuple[str, float]:
    """The error a sweep into ``store`` on ``cluster.address=address`` (timeout 1 s) stops
    with, and how long it took; the store is not created."""
    cfg = composed("cluster=address", f"cluster.address={address}", "cluster.timeout=1")
    start = time.monotonic()
    with pytest.raises(ConfigError) as error:
        sweep(cfg, store)
    assert not store.exists()
    return str(error.value), time.monotonic() - start


def test_an_address_nothing_listens_at_stops_within_its_timeout(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as probe:
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    message, waited = stopped_sweep(tmp_path / "r.zarr", address)  # the port is free again
    assert message == (
        f"cluster.address: no Dask scheduler answered at {address} within 1 s (OSError); "
        "start one with `dask scheduler` or fix the address"
    )
    assert 1 <= waited < 3, waited


def test_an_address_that_accepts_but_does_not_answer_stops_within_its_timeout(tmp_path):
    with silent_listener() as (port, accepted):
        address = f"tcp://127.0.0.1:{port}"
        message, waited = stopped_sweep(tmp_path / "r.zarr", address)
        assert accepted  # it reached the listener
    assert message == (
        f"cluster.address: {address} accepted a connection but did not answer as a Dask "
        "scheduler within 1 s; allowed: a Dask scheduler's address (`dask scheduler` prints it)"
    )
    assert 1 <= waited < 1 + ANSWER_GRACE + 2, waited


def _refusal(*overrides: str, store: Path) -> str:
    """The one line ``python -m pipeline.sweep experiment=smoke <overrides>`` stops with,
    within seconds and before any cluster starts or the store is made."""
    register()
    started = time.process_time()  # this process's CPU: a loaded machine does not count
    problem = check_overrides(["experiment=smoke", f"store={store}", *overrides])
    assert time.process_time() - started < 10
    assert problem is not None and "\n" not in problem
    assert not store.exists()
    return problem


HALF = system.MEMORY_LIMIT // 2
"""Each of two single-threaded workers' memory at ``memory_limit=auto`` on two cores."""
LIMITS = {
    "memory_not_a_size": (
        ["cluster.memory_limit=abc"],
        f"cluster.memory_limit: 'abc' is not allowed; allowed: {MEMORY_LIMITS}",
    ),
    "memory_too_small": (
        ["cluster.memory_limit=1MB"],
        "cluster.memory_limit: '1MB' gives each worker 0.95 MiB, too little for a worker to "
        f"run; allowed: {MEMORY_LIMITS}",
    ),
    "memory_negative": (
        ["cluster.memory_limit=-1GiB"],
        "cluster.memory_limit: '-1GiB' gives each worker -1073741824 B, too little",
    ),
    "memory_just_below_the_least": (
        [f"cluster.memory_limit={MIN_WORKER_MEMORY - 1}"],
        f"cluster.memory_limit: '{MIN_WORKER_MEMORY - 1}' gives each worker ",
    ),
    "workers_past_the_cores": (
        ["cluster.n_workers=1000"],
        f"cluster.n_workers: 1000 is not allowed; allowed: integers in [1, {CPU_COUNT}] or "
        f"null: this machine has {CPU_COUNT} cores and {format_bytes(system.MEMORY_LIMIT)}, and "
        "each worker takes a core and ",
    ),
    "workers_past_the_memory": (
        ["cluster.n_workers=2", "cluster.threads_per_worker=1", "cluster.memory_limit=0.6"],
        "cluster.n_workers: 2 is not allowed; allowed: integers in [1, 1] or null: this "
        f"machine has {CPU_COUNT} cores and {format_bytes(system.MEMORY_LIMIT)}, and each "
        f"worker takes a core and {format_bytes(int(0.6 * system.MEMORY_LIMIT))} "
        "(cluster.memory_limit=0.6)",
    ),
    "slurm_jobs": (
        ["cluster=slurm", "cluster.jobs=4000"],
        "cluster.jobs: 4000 is not allowed; allowed: integers in [1, 1000]",
    ),
    "pbs_jobs": (
        ["cluster=pbs", "cluster.jobs=1001"],
        "cluster.jobs: 1001 is not allowed; allowed: integers in [1, 1000]",
    ),
    "ssh_workers_per_host": (
        ["cluster=ssh", "cluster.workers_per_host=1000"],
        "cluster.workers_per_host: 1000 is not allowed; allowed: integers in [1, 512]",
    ),
}
"""Overrides -> the start of the one line that refuses them."""


@pytest.mark.parametrize("case", sorted(LIMITS))
def test_worker_counts_and_memory_limits_are_bounded_before_any_cluster_starts(case, tmp_path):
    overrides, line = LIMITS[case]
    problem = _refusal(*overrides, store=tmp_path / "s.zarr")
    assert problem.startswith(line), problem


@pytest.mark.parametrize(
    "overrides",
    [
        [f"cluster.n_workers={CPU_COUNT}"],  # the bound itself
        [f"cluster.memory_limit={MIN_WORKER_MEMORY}", "cluster.n_workers=1"],
        ["cluster.memory_limit=0"],  # no limit
        ["cluster=machine", "cluster.memory_limit=1.0"],  # the whole machine
        ["cluster=slurm", "cluster.jobs=1000"],
    ],
    ids=["workers_one_per_core", "memory_the_least", "memory_none", "memory_all", "jobs_most"],
)
def test_the_bounds_themselves_are_allowed(overrides, tmp_path):
    register()
    assert check_overrides(["experiment=smoke", f"store={tmp_path / 's.zarr'}", *overrides]) is None


def test_ssh_connect_options_take_any_key_of_asyncssh_and_keep_the_password_out(tmp_path):
    """The documented form composes (asyncssh's options are a free mapping), every other key
    of the entry stays checked, and the stored config redacts the password."""
    register()
    ssh = ["experiment=smoke", "cluster=ssh", f"store={tmp_path / 's.zarr'}"]
    options = "cluster.connect_options={username: me, password: hunter2, port: 2222}"
    cfg, _ = compose([*ssh, options])
    passed = plain(cfg.cluster.connect_options)  # what SSHCluster is given
    assert passed == {"username": "me", "password": "hunter2", "port": 2222}
    assert type(passed) is dict
    assert check_overrides([*ssh, options]) is None  # composes and validates
    stored = yaml.safe_load(public_config(cfg))["cluster"]["connect_options"]
    assert stored == {"username": "me", "password": REDACTED, "port": 2222}
    cfg, _ = compose([*ssh, "cluster.connect_options.known_hosts=null"])
    assert plain(cfg.cluster.connect_options) == {"known_hosts": None}
    assert check_overrides([*ssh, "cluster.username=me"]).startswith("cluster.username: ")
