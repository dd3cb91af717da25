"""Safe cluster defaults, in this process: TLS wherever the scheduler listens beyond loopback,
its temporary certificates outside the working directory and gone at exit (a SIGTERM
included), and a ``cluster.address`` that does not answer as a Dask scheduler stopping the
sweep within its timeout, before the store is written. Real TLS clusters: ``tests/clusters``.
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
from distributed import Security
from omegaconf import OmegaConf

from pipeline.sweep.backends.address import ANSWER_GRACE
from pipeline.sweep.cluster import tls
from pipeline.sweep.config import CONFIG_DIR, ConfigError
from pipeline.sweep.config.clusters import load_clusters, temporary_tls
from pipeline.sweep.engine import sweep
from pipeline.sweep.main import _stop

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


ENTRIES = load_clusters(CONFIG_DIR / "dask_cluster.yaml")


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
