"""The PBS code path of dask-jobqueue (header, qsub, job IDs, qdel) end to end, over TLS.

Debian has no PBS server: its slurm-wlm-torque package provides qsub, qstat and qdel as
wrappers over Slurm, which is what runs the jobs here. It is not a real PBS.
"""

import re

from conftest import (
    assert_no_secrets,
    assert_same_results,
    jobqueue_entry,
    run_sweep,
    write_clusters,
)


def test_smoke_sweep_through_the_pbs_commands_over_tls_equals_the_local_run(slurm, smoke, tmp_path):
    entry = jobqueue_entry("pbs", security={"temporary": True})
    write_clusters(tmp_path, pbs=entry)
    result = run_sweep(
        "cluster=pbs", "store=r.zarr", "timing.min_seconds=0", cwd=tmp_path, slurm=slurm
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"Dask scheduler: tls://127\.0\.0\.1:\d+", result.stderr), result.stderr
    assert_same_results(tmp_path / "r.zarr", smoke[0])
    assert slurm.jobs() == []  # qdel cancelled them on exit
    assert not list(tmp_path.glob(".dask-tls-*"))  # the temporary certificates are gone
    assert_no_secrets(tmp_path / "r.zarr")
