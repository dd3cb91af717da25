"""Two sweeps started together on one store, again and again: exactly one writes.

    python benchmarks/store_contention.py [rounds]      # default 20 rounds, about 5 minutes

Each round starts two ``python -m pipeline.sweep experiment=smoke`` processes at the same
moment on one new store (one worker each, timing off: a few seconds of work) and checks
that one finished (exit 0) and the other stopped at once with the lock line (exit 2,
before any cluster started), and that the store is whole (every cell done) and sound
(every chunk reads). Prints one line per round and the tally.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zarr

from pipeline.results import damage

SWEEP = [
    sys.executable,
    "-m",
    "pipeline.sweep",
    "experiment=smoke",
    "cluster.n_workers=1",
    "cluster.dashboard_address=:0",
    "timing.enabled=false",
    "store=shared.zarr",
]


def one_round(folder: Path) -> tuple[bool, str]:
    runs = [
        subprocess.Popen(SWEEP, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outcomes = sorted((run.wait(timeout=600), run.stderr.read().decode()) for run in runs)
    codes = [code for code, _ in outcomes]
    refused = outcomes[1][1].strip().splitlines()[-1] if codes == [0, 2] else ""
    store = folder / "shared.zarr"
    group = zarr.open_group(store, mode="r", use_consolidated=False)
    whole = bool(group["done"][...].sum() == group["in_grid"][...].sum() * 4)
    sound = not damage(store)
    ok = codes == [0, 2] and "is locked by a sweep on" in refused and whole and sound
    return ok, f"exit codes {codes}, store whole {whole}, sound {sound}: {refused[:90]}"


def main(rounds: int) -> int:
    passed = 0
    for k in range(rounds):
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            ok, line = one_round(Path(folder))
            passed += ok
            seconds = time.perf_counter() - start
            print(f"round {k + 1:2d}: {'ok' if ok else 'FAILED'} in {seconds:.1f} s; {line}")
    print(f"{passed} of {rounds} rounds: one sweep wrote, the other stopped with the lock line")
    return 0 if passed == rounds else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
