"""The sweep on distributed's SSHCluster through a real sshd on 127.0.0.1."""

import asyncio
import re
import time

import asyncssh
import psutil
import xarray as xr
from conftest import (
    assert_no_secrets,
    assert_same_results,
    run_sweep,
    ssh_entry,
    start_sweep,
    write_clusters,
)

from pipeline.sweep.provenance import REDACTED

from sweeping import done_count, kill_group, wait_for

SLOW = ["timing.min_seconds=0.1", "timing.repeats=3", "timing.max_repeats=1000"]
"""Each model's eight cells time for at least 0.8 s: long enough to interrupt."""


def test_smoke_sweep_over_ssh_with_tls_equals_the_local_run(sshd, smoke, tmp_path):
    write_clusters(tmp_path, ssh=ssh_entry(sshd, security={"temporary": True}))
    result = run_sweep("cluster=ssh", "store=r.zarr", "timing.min_seconds=0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"Dask scheduler: tls://127\.0\.0\.1:\d+", result.stderr), result.stderr
    # A login through sshd does not carry this environment's OPENBLAS_CORETYPE: OpenBLAS
    # may pick another kernel, whose sums can differ in the last bit.
    assert_same_results(tmp_path / "r.zarr", smoke[0], rtol=1e-13)
    assert_no_secrets(tmp_path / "r.zarr")
    assert_no_secrets(tmp_path / "outputs")  # Hydra's run folder keeps no copy of the config
    assert f"password: {REDACTED}\n" in xr.open_zarr(tmp_path / "r.zarr").attrs["config"]


def _ssh_workers(sshd, since: float) -> list[psutil.Process]:
    """The worker processes SSHCluster started through ``sshd`` (a nanny each, its worker a
    child) at or after ``since`` (``time.time()``): an earlier test's may still be exiting,
    and other tests start nannies of their own beside this one."""
    found = []
    for process in sshd.sessions():
        try:
            command = " ".join(process.cmdline())
            if "distributed.cli.dask_spec" in command and "Nanny" in command:
                if process.create_time() >= since:
                    found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


def test_a_killed_ssh_worker_costs_only_its_cells(sshd, smoke, tmp_path):
    write_clusters(tmp_path, ssh=ssh_entry(sshd))
    started = time.time() - 1  # process start times are rounded
    run = start_sweep("cluster=ssh", "store=r.zarr", *SLOW, cwd=tmp_path)
    try:
        wait_for(lambda: done_count(tmp_path / "r.zarr") >= 8, 120, "the first finished cells")
        workers = _ssh_workers(sshd, started)
        assert len(workers) == 2, workers
        victims = [workers[0], *workers[0].children(recursive=True)]
        for process in victims:
            process.kill()  # SIGKILL: the nanny cannot restart its worker
        psutil.wait_procs(victims, timeout=10)
        _, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            kill_group(run)
    assert run.returncode == 0, err
    assert_same_results(tmp_path / "r.zarr", smoke[0], rtol=1e-13)


def test_what_a_dead_client_left_running_through_sshd_is_found_and_ended(sshd):
    async def leave_running() -> None:
        async with asyncssh.connect("127.0.0.1", **sshd.connect_options) as connection:
            # Detached from the login, like a killed sweep's SSH scheduler and workers.
            await connection.run("setsid sleep 300 >/dev/null 2>&1 < /dev/null &", check=True)

    asyncio.run(leave_running())
    wait_for(lambda: any("sleep" in p.name() for p in sshd.sessions()), 10, "the sleep")
    sshd.end_sessions()
    assert not sshd.sessions()
