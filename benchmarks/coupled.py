"""Costs of Thon and Kersting's coupled-HMM inference by chains k and states per chain n,
run by hand:

    python benchmarks/coupled.py [--out reports/coupled/scaling.png]

Per step of a 50-step sequence, median of repeats: one sweep of the structured mean
field over the chains (the time of 1 + 3 sweeps less that of 1, over 3), with
mixed-memory tables (which ignore the chain's own state) and with general pairwise
tables (as a grounded relational spec has); one cycle of the chain-wise
Viterbi, and one exact step of the joint chain (the structured operator, and the dense
product where the joint matrix fits in memory). Prints the log-log slope of each against
n per k and draws them.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from pipeline.coupled import exact, meanfield
from pipeline.coupled.family import build
from pipeline.coupled.viterbi import _update
from pipeline.sweep.provenance import blas, cpu, memory

STEPS = 50
SWEEPS = 3
SIZES = {2: [8, 16, 32, 64, 128, 256, 512], 3: [8, 16, 32, 64, 128], 4: [8, 16, 32, 64, 128]}
FIT = 3
"""Slopes are fitted over the largest this many sizes (the smallest are fixed costs)."""
MAX_DENSE = 25_000_000
"""Joint matrices up to this many entries are materialised for the dense step."""
MAX_STRUCTURED = 2e9
"""Structured steps estimated above this many multiply-adds are skipped."""


def median_seconds(function, repeats: int = 5, budget: float = 5.0) -> float:
    times, start = [], time.perf_counter()
    while not times or (len(times) < repeats and time.perf_counter() - start < budget):
        begin = time.perf_counter()
        function()
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def general(model):
    """The same model with every pair table stored whole (n_i, n_j, n_i), so inference takes
    the general pairwise path a grounded relational spec takes."""
    pairs = tuple(
        tuple(None if t is None else np.ascontiguousarray(t) for t in row) for row in model.pairs
    )
    return dataclasses.replace(model, pairs=pairs)


def measure(k: int, n: int) -> dict[str, float]:
    model = build(k, n, seed=0, eps=0.2, n_observations=4)
    paths, observations = model.sample(STEPS, np.random.default_rng(0))
    out = {}
    for name, m in (
        ("mean field (mixed memory)", model),
        ("mean field (pairwise)", general(model)),
    ):
        if name.endswith("(pairwise)") and k * (k - 1) * n**3 * STEPS > 5e9:
            continue
        one, more = (
            median_seconds(
                lambda m=m, s=sweeps: meanfield.smoothing(
                    m, observations, tolerance=0, max_iterations=s
                )
            )
            for sweeps in (1, 1 + SWEEPS)
        )
        out[name] = max(more - one, 0) / SWEEPS / STEPS
    out["chain-wise Viterbi cycle"] = (
        median_seconds(lambda: [_update(model, i, paths.copy(), observations) for i in range(k)])
        / STEPS
    )
    joint_states = n**k
    T = exact.JointTransition(model)
    cost = len(T.terms) * k * n ** (k + 1)
    if cost < MAX_STRUCTURED:
        belief = np.full(joint_states, 1 / joint_states)
        out["exact step (structured)"] = median_seconds(lambda: T.forward(belief))
    if joint_states**2 <= MAX_DENSE:
        dense = T.toarray()
        belief = np.full(joint_states, 1 / joint_states)
        out["exact step (dense)"] = median_seconds(lambda: belief @ dense)
    return out


def slope(sizes, seconds) -> float:
    keep = [(n, s) for n, s in zip(sizes, seconds, strict=True) if s and np.isfinite(s)][-FIT:]
    if len(keep) < 2:
        return float("nan")
    x, y = np.log([n for n, _ in keep]), np.log([s for _, s in keep])
    return float(np.polyfit(x, y, 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="draw the figure to this PNG")
    args = parser.parse_args()
    print(f"# {cpu()}, {memory()} memory; BLAS {blas()}")
    results = {k: {n: measure(k, n) for n in sizes} for k, sizes in SIZES.items()}
    names = sorted({name for per_k in results.values() for r in per_k.values() for name in r})
    figure = Figure(figsize=(12, 4), layout="constrained")
    axes = figure.subplots(1, len(SIZES), sharey=True)
    for axis, (k, per_n) in zip(axes, results.items(), strict=True):
        sizes = list(per_n)
        print(f"\nk = {k}: microseconds per step")
        print(f"{'n':>5} " + " ".join(f"{name[:26]:>27}" for name in names))
        for n in sizes:
            row = [per_n[n].get(name, np.nan) * 1e6 for name in names]
            print(f"{n:>5} " + " ".join(f"{v:>27.1f}" for v in row))
        for name in names:
            seconds = [per_n[n].get(name, np.nan) for n in sizes]
            fit = slope(sizes, seconds)
            print(f"  slope of {name} against n over its largest {FIT} sizes: {fit:.2f}")
            axis.plot(sizes, seconds, marker="o", label=f"{name} (n^{fit:.1f})")
        axis.set(xscale="log", yscale="log", title=f"k = {k} chains", xlabel="states per chain n")
        axis.legend(fontsize="x-small")
    axes[0].set_ylabel("seconds per step")
    if args.out:
        figure.savefig(args.out, dpi=90)
        print(f"\nfigure: {args.out}")


if __name__ == "__main__":
    main()
