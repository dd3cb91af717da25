"""Peak memory of one scale cell against the number of states, beside its model's size.

    python benchmarks/cell_memory.py [n_states ...]   # default 100000 1000000 10000000

For each structured scale family (Bell, peaked) and size, a fresh process runs the cells of
one model as a worker does (``plan.run_model``: build, Doeblin gamma, the exact reference
(at 10^7 states its history goes to disk), top-0.9, prediction over 50 steps read against
it chunk by chunk, timing off) and reports
its peak resident memory (``ru_maxrss``: everything the cell held at once, the
interpreter and its libraries included; measured before the model is built a second time
for its size), the bytes of the exact model's arrays, the
peak over the model, and the sweep's estimate made before anything runs (the number
``grid.n_states`` is refused on). At 10^7 states the peaked model alone takes about 70 s
to build and 5.3 GiB: the whole run is about 5 minutes and needs about 12 GiB free.
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import json, resource, sys
import numpy as np
from pipeline.kinds.methods import memory, plan, records, tasks
from pipeline.kinds.methods.grid import Cell
from pipeline.sweep.timing import Timing

def nbytes(m):
    if isinstance(m, np.ndarray):
        return m.nbytes
    if hasattr(m, "sparse"):  # sparse peaks plus a rank-one background
        return nbytes(m.sparse) + m.u.nbytes + m.v.nbytes
    return m.data.nbytes + m.indices.nbytes + m.indptr.nbytes

family, n = sys.argv[1], int(sys.argv[2])
spec = records.ModelSpec(family, n, 0, {"structured": True})
timing = Timing(repeats=1, min_seconds=0.0, max_repeats=1, threads=1, enabled=False)
settings = plan.Settings(
    horizon=50, observe_every=5, timing=timing, gamma_exact_max_states=0, exact_max_states=None
)
(result,) = plan.run_model(spec, [Cell(family, n, "topp", 0.9, 0, "predict")], settings)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
hmm = tasks.build(spec).hmm
found = memory.estimate(family, n, spec.params, "topp", 0.9, 51)
print(json.dumps({
    "peak": peak,
    "model": hmm.prior.nbytes + nbytes(hmm.transition) + nbytes(hmm.emission),
    "estimate": found.total if found else None,
}))
"""


def one(family: str, n: int) -> dict:
    """What the child measures and reports, for one model."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, family, str(n)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(sizes: list[int]) -> None:
    gib = 2**30
    print(
        f"{'family':>7} {'n_states':>10} {'peak GiB':>9} {'model GiB':>10} {'peak/model':>11} "
        f"{'estimate GiB':>13} {'peak/estimate':>14}"
    )
    for n in sorted(sizes):
        for family in ("bell", "peaked"):
            found = one(family, n)
            estimate = found["estimate"]
            print(
                f"{family:>7} {n:>10,} {found['peak'] / gib:>9.2f} {found['model'] / gib:>10.2f} "
                f"{found['peak'] / found['model']:>11.2f} "
                + (
                    f"{estimate / gib:>13.2f} {found['peak'] / estimate:>14.2f}" if estimate else ""
                ),
                flush=True,
            )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 1_000_000, 10_000_000])
