"""The environment a worker process of the pipeline starts with: what its threads do when
idle and how it allocates, read as the process and its libraries start (so set before
they load: ``pipeline.sweep.cluster`` gives it to every worker it starts, through
distributed's nanny for a local or SSH cluster and in a batch job's script; and
``benchmarks/lm_epoch.py`` to itself before numpy loads). This module imports nothing, so
a script can read it first.
"""

from __future__ import annotations

WORKER_ENVIRONMENT = {
    "OMP_WAIT_POLICY": "PASSIVE",
    "OPENBLAS_THREAD_TIMEOUT": "4",
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
}
"""What a worker process has in its environment beside distributed's own (a variable
already set in the environment wins):

- numba's OpenMP threads and OpenBLAS's sleep as soon as their parallel step or product
  ends (OpenBLAS after 2^4 cycles, the least it allows) rather than spinning for the
  next. A task on several threads (``training.threads``) alternates compiled passes and
  BLAS products; spinning, each pool holds the cores the other needs next.
- allocations below 32 MiB reuse the heap, as glibc's default allows them to: distributed
  sets ``MALLOC_TRIM_THRESHOLD_``, which also fixes glibc's threshold for mapping a block
  afresh at 128 KiB, so every array of a few MiB a step makes would be mapped, faulted in
  page by page and unmapped again.

What each costs a training step: ``docs/benchmarks.md`` (HMM LM training steps)."""
