"""Helpers of the sweep's tests: configs composed by Hydra, plug-ins installed for a run,
sweeps and Dask processes run for real, and small disks (real tmpfs mounts) that fill up."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import zarr

from pipeline.sweep.config import compose
from pipeline.sweep.timing import WARMUP


def composed(*overrides):
    """The sweep's config composed by Hydra from the smoke experiment and ``overrides``."""
    return compose(["experiment=smoke", *overrides])[0]


# --- plug-ins -------------------------------------------------------------------------------


def on_path(*folders, **variables) -> dict[str, str]:
    """This process's environment with ``folders`` first on ``PYTHONPATH`` (before what it
    held) and ``variables`` set: for a sweep that finds plug-ins installed there."""
    path = [str(folder) for folder in folders] + [os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path)), **variables}


def install(root, package, modules: dict[str, str], entry_points: dict[str, dict[str, str]]):
    """A distribution ``package`` 0.1 with ``modules`` (name -> source) and ``entry_points``
    (group -> name -> object), as pip would leave it in site-packages."""
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in names.items())
            for group, names in entry_points.items()
        )
    )
    for name, source in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(source))


# --- running the sweep and Dask processes for real -----------------------------------------

TINY = ["experiment=smoke", "cluster.dashboard_address=:0", "cluster.n_workers=2"]
"""A seconds-long sweep on a 2-worker LocalCluster with a free dashboard port."""


def sweep(
    *overrides: str, cwd: Path, timeout: float = 240, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run ``python -m pipeline.sweep`` as a user would, in ``cwd`` (``env``: its environment)."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline.sweep", *overrides],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def start_sweep(*overrides: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """Start a sweep in its own process group (so it can be killed with its workers)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.sweep", *overrides],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
    )


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL a process started by ``start_sweep`` and everything it started (that is
    left)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # the whole group has ended
        pass
    process.wait(timeout=30)


def done_count(store: Path) -> int:
    """Cells marked done in a store another process is writing (0 before it exists)."""
    try:
        group = zarr.open_group(store, mode="r", use_consolidated=False)
        return int(group["done"][...].sum())
    except (FileNotFoundError, KeyError, ValueError):
        return 0


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.1)


def assert_warmup_attributes(ds, schema) -> None:
    """Every variable ``schema`` marks ``timed`` says in its ``warmup`` attribute how its
    calls were warmed up (``pipeline.sweep.timing.WARMUP``), and no other variable does."""
    for name, variable in schema.variables.items():
        assert (ds[name].attrs.get("warmup") == WARMUP) == variable.timed, name


# --- small disks ----------------------------------------------------------------------------

_HOLD_A_TMPFS = """
mount -t tmpfs -o size=4m tmpfs "$1" 2>&1; echo "status $?"
while read -r options; do
    mount --options-mode ignore -o "remount,$options" "$1" 2>&1; echo "status $?"
done
"""
"""Mount a tmpfs of 4 MiB on ``$1``, then remount it with the options on each line read
(``ro``, ``size=100k``), answering every command with its status. ``--options-mode
ignore``: inside a user namespace ``mount`` would repeat the options of the mount table,
``uid=`` among them, which the namespace does not map, and the kernel would refuse them."""


class Tmpfs:
    """A real tmpfs of 4 MiB, held by a shell in a mount namespace of its own: the mount
    lives as long as the shell.

    ``path`` is the mount as this process reaches it, through the shell's root
    (``/proc/<pid>/root/...``); ``remount`` changes its options while it is mounted.
    """

    def __init__(self, shell: subprocess.Popen, folder: Path) -> None:
        self._shell = shell
        self.path = Path(f"/proc/{shell.pid}/root{folder}")

    def _answer(self) -> tuple[int | None, str]:
        """The status of the shell's last command (None if the shell ended) and what it said."""
        said = []
        for line in iter(self._shell.stdout.readline, ""):
            if line.startswith("status "):
                return int(line.split()[1]), " ".join(said)
            said.append(line.strip())
        return None, " ".join(said)

    def remount(self, options: str) -> None:
        """Remount with ``options`` (``ro``, ``size=100k``)."""
        self._shell.stdin.write(f"{options}\n")
        self._shell.stdin.flush()
        status, said = self._answer()
        assert status == 0, f"remount,{options} of {self.path}: {said}"


@contextlib.contextmanager
def tmpfs(folder: Path):
    """A ``Tmpfs`` on the new folder ``folder`` (an absolute path), unmounted on exit.

    Root mounts it in a new mount namespace, any other user in a new user namespace too,
    which needs no privilege where the kernel allows unprivileged user namespaces. Where
    neither works the test is skipped, saying why in one line.
    """
    folder.mkdir()
    root = os.geteuid() == 0
    namespaces = ["--mount"] if root else ["--user", "--map-root-user", "--mount"]
    try:
        shell = subprocess.Popen(
            ["unshare", *namespaces, "sh", "-c", _HOLD_A_TMPFS, "tmpfs", str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    except FileNotFoundError:
        pytest.skip("cannot mount a tmpfs: no unshare command (util-linux) for a mount namespace")
    with shell:
        disk = Tmpfs(shell, folder)
        status, said = disk._answer()
        if status != 0:
            shell.stdin.close()
            unshare = " ".join(["unshare", *namespaces])
            how = "as root" if root else "without root, in a user namespace"
            pytest.skip(f"cannot mount a tmpfs {how} ({unshare}: {said})")
        try:
            yield disk
        finally:
            shell.stdin.close()
            shell.wait(timeout=30)
