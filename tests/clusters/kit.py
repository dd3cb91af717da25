"""A real Slurm (with Debian's PBS wrappers over it) and a real sshd on loopback, for tests.

Everything runs on 127.0.0.1 from Debian's packages, in a private temporary directory:
``munged`` (as user ``munge``), ``slurmctld`` and ``slurmd`` for one node with ports of
their own, and ``sshd`` with its own host key, accepting one generated client key and
nothing else; every one of them listens on 127.0.0.1 only (Slurm's daemons bind to their
configured address, ``CommunicationParameters=NoCtldInAddrAny,NoInAddrAny``, not to every
interface). The packages are installed beforehand by ``tests/clusters/setup-packages``
(``.ci/run`` runs it), never by the kit; services are started in the foreground and stopped
by the PIDs started here (Slurm's jobs first: they outlive slurmd). ``Unavailable`` says
why a service cannot run here (not root, packages missing and how to install them).

Every Slurm client call needs ``SLURM_CONF`` (``Slurm.env``): without it the client looks
the controller up in DNS.

By hand: ``python tests/clusters/kit.py`` brings both up, prints how to reach them and
waits for Ctrl-C.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

SLURM_PACKAGES = ("munge", "slurmctld", "slurmd", "slurm-client", "slurm-wlm-torque")
SSH_PACKAGES = ("openssh-server",)


class Unavailable(RuntimeError):
    """A service of the kit cannot run on this machine; the message says why."""


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {timeout:g} s")
        time.sleep(interval)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def _installed(package: str) -> bool:
    status = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
    )
    return status.stdout.endswith("install ok installed")


SETUP = "tests/clusters/setup-packages"
"""The documented setup step that installs the kit's Debian packages (``.ci/run`` runs it)."""


def require_packages(packages: tuple[str, ...]) -> None:
    """``Unavailable`` naming the missing Debian ``packages`` and the setup step that installs
    them: the kit never installs anything itself."""
    if os.geteuid() != 0:
        raise Unavailable("the cluster test kit needs root (munged, slurmd, sshd)")
    missing = [package for package in packages if not _installed(package)]
    if missing:
        raise Unavailable(f"{', '.join(missing)} not installed: run `sudo {SETUP}` once")


class _Services:
    """Processes started here, stopped in reverse order by their PIDs."""

    def __init__(self, root: Path):
        self.root = root
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str, command: list[str], **options) -> subprocess.Popen:
        log = open(self.root / f"{name}.out", "w")
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **options
        )
        log.close()
        self.processes[name] = process
        return process

    def check(self) -> None:
        """Raise with the log's end if a started process has exited."""
        for name, process in self.processes.items():
            if process.poll() is not None:
                tail = (self.root / f"{name}.out").read_text()[-2000:]
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")

    def listening(self) -> set[str]:
        """``address:port`` of every TCP socket the started processes listen on, as ``ss``
        shows them (``ss -ltnpH``, the processes' PIDs)."""
        pids = {str(process.pid) for process in self.processes.values()}
        lines = subprocess.run(
            ["ss", "-ltnpH"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        return {line.split()[3] for line in lines if any(f"pid={pid}," in line for pid in pids)}

    def stop(self) -> None:
        for process in reversed(self.processes.values()):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
        self.processes.clear()


def _private_root(prefix: str) -> Path:
    """A new directory under the system's temporary directory that other users can traverse
    (munged runs as ``munge``), but not list."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o711)
    for parent in root.parents:
        if not os.stat(parent).st_mode & 0o001:
            raise Unavailable(f"{parent} is not traversable by other users (munged needs it)")
    return root


SLURM_CONF = """\
ClusterName=pipeline-test
SlurmctldHost={host}(127.0.0.1)
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmctldPort={controller_port}
SlurmdPort={node_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SchedulerParameters=sched_interval=1
MessageTimeout=5
KillWait=2
InactiveLimit=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 RealMemory=8192 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""
"""One node, ``localhost`` at 127.0.0.1, four CPUs (``config_overrides``: more than this
machine has, so a replacement job can start while a cancelled one is still ending)."""


class Slurm:
    """munged + slurmctld + slurmd on 127.0.0.1; ``env`` carries ``SLURM_CONF``."""

    def __init__(self):
        require_packages(SLURM_PACKAGES)
        self.root = _private_root("pipeline-slurm-")
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._services = _Services(self.root)

    def start(self, timeout: float = 30) -> Slurm:
        munge = pwd.getpwnam("munge")
        sockets = self.root / "munge"
        sockets.mkdir(mode=0o711)
        for name in ("state", "spool"):
            (self.root / name).mkdir(mode=0o700)
        key = sockets / "munge.key"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
        os.chown(sockets, munge.pw_uid, munge.pw_gid)
        os.chown(key, munge.pw_uid, munge.pw_gid)
        self._services.start(
            "munged",
            [
                "munged",
                "--foreground",
                f"--socket={sockets}/munge.socket",
                f"--key-file={key}",
                f"--pid-file={sockets}/munged.pid",
                f"--log-file={sockets}/munged.log",
                f"--seed-file={sockets}/munged.seed",
            ],
            user=munge.pw_uid,
            group=munge.pw_gid,
        )
        wait_until(lambda: (sockets / "munge.socket").exists(), timeout, "munged's socket")
        self.conf.write_text(
            SLURM_CONF.format(
                host=socket.gethostname(),
                controller_port=free_port(),
                node_port=free_port(),
                root=self.root,
            )
        )
        self._services.start("slurmctld", ["slurmctld", "-D", "-i"], env=self.env)
        self._services.start("slurmd", ["slurmd", "-D", "-N", "localhost"], env=self.env)

        def idle() -> bool:
            self._services.check()
            state = self.call("sinfo", "-h", "-N", "-o", "%t", check=False).stdout.strip()
            return state == "idle"

        wait_until(idle, timeout, "the Slurm node to be idle", interval=0.2)
        return self

    def call(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm (or PBS wrapper) client command, with ``SLURM_CONF`` set."""
        return subprocess.run(command, env=self.env, capture_output=True, text=True, check=check)

    def jobs(self) -> list[str]:
        """The IDs of the jobs in the queue, in any state."""
        return self.call("squeue", "-h", "-o", "%i").stdout.split()

    def cancel_all(self, timeout: float = 30) -> None:
        """Cancel every job and wait until the queue is empty."""
        jobs = self.jobs()
        if jobs:
            self.call("scancel", *jobs, check=False)
        wait_until(lambda: not self.jobs(), timeout, "the cancelled jobs to leave the queue")

    def listening(self) -> set[str]:
        """``address:port`` of the TCP sockets slurmctld and slurmd listen on."""
        return self._services.listening()

    def stop(self) -> None:
        try:
            if all(process.poll() is None for process in self._services.processes.values()):
                self.cancel_all()
        finally:
            self._services.stop()
            shutil.rmtree(self.root, ignore_errors=True)


SSHD_CONF = """\
ListenAddress 127.0.0.1:{port}
HostKey {root}/host_key
AuthorizedKeysFile {root}/authorized_keys
PidFile {root}/sshd.pid
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
"""
"""Key-only logins to 127.0.0.1:<port>; ``StrictModes no`` because the keys live under the
system's temporary directory, not a home directory."""


class Sshd:
    """sshd on 127.0.0.1:``port``; ``connect_options`` are asyncssh's for its one client key."""

    def __init__(self):
        require_packages(SSH_PACKAGES)
        self.root = _private_root("pipeline-sshd-")
        self.root.chmod(0o700)
        self.port = free_port()
        self._services = _Services(self.root)

    def start(self, timeout: float = 15) -> Sshd:
        root = self.root
        for name in ("host_key", "client_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)],
                check=True,
            )
        shutil.copy(root / "client_key.pub", root / "authorized_keys")
        host_key = (root / "host_key.pub").read_text().split()[:2]
        (root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {' '.join(host_key)}\n")
        (root / "sshd_config").write_text(SSHD_CONF.format(port=self.port, root=root))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        self._services.start("sshd", [sshd, "-D", "-e", "-f", str(root / "sshd_config")])

        def ready() -> bool:
            self._services.check()
            return answers(self.port)

        wait_until(ready, timeout, "sshd to accept connections")
        return self

    @property
    def connect_options(self) -> dict:
        return {
            "port": self.port,
            "username": pwd.getpwuid(os.geteuid()).pw_name,
            "client_keys": [str(self.root / "client_key")],
            "known_hosts": str(self.root / "known_hosts"),
        }

    def listening(self) -> set[str]:
        """``address:port`` of the TCP sockets sshd listens on."""
        return self._services.listening()

    def sessions(self) -> list[psutil.Process]:
        """The processes started through this sshd's logins, still running: each carries
        ``SSH_CONNECTION`` naming this port. A login's processes outlive it when its client
        dies (a killed sweep's SSH scheduler and workers): sshd does not stop them."""
        found = []
        for process in psutil.process_iter():
            try:
                connection = process.environ().get("SSH_CONNECTION", "").split()
            except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            if len(connection) == 4 and connection[3] == str(self.port):
                found.append(process)
        return found

    def end_sessions(self) -> None:
        """Kill what ``sessions`` finds and wait for it."""
        found = self.sessions()
        for process in found:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(found, timeout=10)

    def stop(self) -> None:
        self.end_sessions()
        self._services.stop()
        shutil.rmtree(self.root, ignore_errors=True)


if __name__ == "__main__":
    slurm, sshd = Slurm().start(), Sshd().start()
    try:
        print(f"export SLURM_CONF={slurm.conf}")
        print(f"ssh connect_options: {sshd.connect_options}")
        print("Ctrl-C stops both")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        slurm.stop()
        sshd.stop()
