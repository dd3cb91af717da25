"""The CSR step with prefetching against the plain scatter, side by side, one thread.

    python benchmarks/far_scatter.py [n_states ...]   # default 100000 300000 1000000 10000000

For the structured Bell (5 consecutive columns a row at a random place) and peaked (16
random columns a row) models, the sparse part of their exact transitions is stepped from
a random belief by the plain scatter (``_scatter_entries``: one loop over the entries) and
by ``_scatter_far``, which asks for each entry's output line ``PREFETCH_DISTANCE``
entries ahead and which the step takes from ``PREFETCH_STATES`` states on. Alternating
runs, medians of 7 and the median of the per-pair ratios; the two outputs are compared
to the last bit. At 10^7 states the peaked model takes about 70 s to build and 5.3 GiB.
"""

from __future__ import annotations

import statistics
import sys
import time

import numba
import numpy as np

from pipeline.kernels import forward
from pipeline.models import build_model

REPEATS = 7


def pair(family: str, n: int) -> tuple[float, float, float, bool]:
    """Median seconds of the plain and the prefetching scatter, their median ratio, and
    whether their outputs are equal to the last bit."""
    sparse = build_model(family, n, structured=True).transition_layout.sparse
    indptr, indices, data = sparse.indptr, sparse.indices, sparse.data
    rows = np.repeat(np.arange(n), np.diff(indptr))
    belief = np.random.default_rng(0).dirichlet(np.ones(n))
    plain, far = np.empty(n), np.empty(n)

    def run_plain():
        forward._scatter_entries(indptr, indices, data, rows, belief, plain)

    def run_far():
        forward._scatter_far(indptr, indices, data, belief, far)

    run_plain(), run_far()  # compiled, and the pages mapped, before timing
    times: dict = {run_plain: [], run_far: []}
    for repeat in range(REPEATS):
        for run in (run_plain, run_far) if repeat % 2 == 0 else (run_far, run_plain):
            start = time.perf_counter()
            run()
            times[run].append(time.perf_counter() - start)
    ratio = statistics.median(p / f for p, f in zip(times[run_plain], times[run_far], strict=True))
    same = np.array_equal(plain, far)
    return statistics.median(times[run_plain]), statistics.median(times[run_far]), ratio, same


def main() -> None:
    sizes = [int(n) for n in sys.argv[1:]] or [100_000, 300_000, 1_000_000, 10_000_000]
    numba.set_num_threads(1)
    print(
        f"prefetching from {forward.PREFETCH_STATES:,} states, {forward.PREFETCH_DISTANCE} "
        "entries ahead; one thread, medians of 7"
    )
    for n in sizes:
        for family in ("bell", "peaked"):
            plain, far, ratio, same = pair(family, n)
            print(
                f"   {family:<7} n={n:>10,}   plain {plain * 1e3:9.2f} ms   prefetching "
                f"{far * 1e3:9.2f} ms   {ratio:5.2f}x   same to the last bit: {same}"
            )


if __name__ == "__main__":
    main()
