"""The sweep on a real Slurm through dask-jobqueue: the smoke sweep, a lost job, a killed sweep."""

import re

import pytest
from conftest import assert_same_results, jobqueue_entry, run_sweep, start_sweep, write_clusters
from omegaconf import OmegaConf

from pipeline.sweep.backends.jobqueue import JobqueueClusterConfig
from pipeline.sweep.cluster import connect
from pipeline.sweep.config import ConfigError

from sweeping import done_count, kill_group, wait_for

SLOW = ["timing.min_seconds=0.1", "timing.repeats=3", "timing.max_repeats=1000"]
"""Each cell times for at least 0.1 s: long enough to interrupt."""


def test_the_kits_servers_listen_on_loopback_only(slurm, sshd):
    """slurmctld, slurmd and sshd, as ``ss -ltnp`` shows them: on 127.0.0.1 alone (Slurm binds
    to every interface unless ``CommunicationParameters=NoInAddrAny``)."""
    found = slurm.listening() | sshd.listening()
    assert len(found) == 3, found  # slurmctld's port, slurmd's, sshd's
    assert all(address.startswith("127.0.0.1:") for address in found), found


def test_smoke_sweep_on_slurm_equals_the_local_run(slurm, smoke, tmp_path):
    write_clusters(tmp_path, slurm=jobqueue_entry("slurm"))
    result = run_sweep(
        "cluster=slurm", "store=r.zarr", "timing.min_seconds=0", cwd=tmp_path, slurm=slurm
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"Dask scheduler: tcp://127\.0\.0\.1:\d+", result.stderr)
    link = re.search(r"Dask dashboard: (http://127\.0\.0\.1:\d+/status)", result.stderr)
    assert link, result.stderr
    assert_same_results(tmp_path / "r.zarr", smoke[0])
    assert slurm.jobs() == []  # the jobs were cancelled on exit
    outputs = sorted(tmp_path.glob("slurm-*.out"))
    assert len(outputs) == 2  # two batch jobs ran the workers
    assert all("Starting Worker" in path.read_text() for path in outputs)


def test_a_cancelled_job_is_replaced_and_the_sweep_completes(slurm, smoke, tmp_path):
    write_clusters(tmp_path, slurm=jobqueue_entry("slurm", jobs=1))
    run = start_sweep("cluster=slurm", "store=r.zarr", *SLOW, cwd=tmp_path, slurm=slurm)
    try:
        wait_for(lambda: done_count(tmp_path / "r.zarr") >= 8, 120, "the first finished cells")
        (job,) = slurm.jobs()
        slurm.call("scancel", job)
        _, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            kill_group(run)
    assert run.returncode == 0, err
    assert_same_results(tmp_path / "r.zarr", smoke[0])
    assert len(list(tmp_path.glob("slurm-*.out"))) == 2  # the only job, then its replacement
    assert slurm.jobs() == []


def test_a_killed_sweep_leaves_no_job_and_resumes(slurm, smoke, tmp_path):
    write_clusters(tmp_path, slurm=jobqueue_entry("slurm"))
    run = start_sweep("cluster=slurm", "store=r.zarr", *SLOW, cwd=tmp_path, slurm=slurm)
    wait_for(lambda: done_count(tmp_path / "r.zarr") >= 8, 120, "the first finished cells")
    kill_group(run)  # SIGKILL: nothing of the sweep can cancel its jobs
    survived = done_count(tmp_path / "r.zarr")
    assert 8 <= survived < 288
    assert slurm.jobs(), "the jobs outlive the sweep's process"
    # A worker whose scheduler is gone ends after death_timeout, and its job with it.
    wait_for(lambda: not slurm.jobs(), 60, "the orphaned jobs to end")

    again = run_sweep("cluster=slurm", "store=r.zarr", *SLOW, cwd=tmp_path, slurm=slurm)
    assert again.returncode == 0, again.stderr
    computed, already = map(
        int, re.search(r"(\d+) cells to compute, (\d+) already done", again.stderr).groups()
    )
    assert already == survived and computed == 288 - survived
    assert_same_results(tmp_path / "r.zarr", smoke[0])
    assert slurm.jobs() == []


def test_a_refused_submission_is_a_one_line_error(slurm, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    entry = {**jobqueue_entry("slurm", queue="nowhere"), "dashboard_address": "127.0.0.1:0"}
    cfg = OmegaConf.structured(JobqueueClusterConfig(**entry))
    with pytest.raises(ConfigError) as error, connect(cfg):
        pass
    message = str(error.value)
    assert message.startswith("cluster: cluster=slurm did not start: ") and "\n" not in message
    assert "Invalid partition name specified" in message, message
    assert slurm.jobs() == []
