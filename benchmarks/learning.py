"""One EM iteration's cost by family, size and E-step, run by hand to size the learning sweep:

    python benchmarks/learning.py [--families bell dirichlet lm] [--sizes 800 2000 5000]

For each generating model, a problem as the sweep draws it (``pipeline.learning.problem``:
training sequences and a start model perturbed from the truth), then per E-step (exact, or
an approximation at a setting): the warm-up the sweep makes (``compare.warm_up``), then
``--iterations`` timed iterations from the start model; it prints the median E-step and
M-step seconds, and apart the seconds of building the approximation from the start model
(part of every E-step, whatever the data), with BLAS and numba fixed to one thread (a sweep
worker's). An E-step whose warm-up took longer than ``--budget`` seconds is not timed. For
the paper's top-p and top-k, which truncate the emissions, it prints how many training
sequences their approximation of the start model and of the truth rules out (log-likelihood
-inf), which ``fit`` refuses.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from pipeline.inference import smoothing
from pipeline.learning import fit
from pipeline.learning.compare import warm_up
from pipeline.learning.problem import draw
from pipeline.methods import approximate
from pipeline.models import build_model

E_STEPS = [
    (None, None),
    ("topp_transitions", 0.9),
    ("topp_transitions", 0.99),
    ("topk_transitions", 5),
    ("topk_transitions", 20),
    ("lowrank", 8),
    ("lowrank", 32),
    ("banded_lowrank", 8),
    ("banded_lowrank", 32),
    ("topp", 0.9),
    ("topp", 0.99),
    ("topk", 20),
]
"""The E-steps timed: exact, then (method, setting)."""

PARAMETERS = {"dirichlet": {"alpha": 0.05}}
"""The families' parameters of ``conf/experiment/methods.yaml``."""

PSEUDOCOUNT = 0.01


def ruled_out(model, method: str, setting, training: np.ndarray) -> int:
    """How many of ``training``'s sequences the approximation of ``model`` scores -inf."""
    smoothed = smoothing(approximate(model, method, setting).hmm, training)
    return int(np.count_nonzero(smoothed.log_evidence == -np.inf))


def measure(family: str, n: int, args) -> None:
    truth = build_model(family, n, seed=0, **PARAMETERS.get(family, {}))
    problem = draw(truth, sequences=args.sequences, length=args.length, held_out=1, seed=0)
    tokens = problem.training.size
    print(f"\n{family} n={n}: {args.sequences} x {args.length} = {tokens} training steps")
    for method, setting in E_STEPS:
        name = "exact" if method is None else f"{method} {setting}"
        if not {method or "exact", f"{method}:{setting}"} & set(args.methods):
            continue
        if method in ("topp", "topk"):
            start = ruled_out(problem.start, method, setting, problem.training)
            true = ruled_out(truth, method, setting, problem.training)
            print(
                f"  {name:22s} rules out {start}/{args.sequences} sequences of the start, "
                f"{true}/{args.sequences} of the truth",
                flush=True,
            )
            if start:
                continue
        begin = time.perf_counter()
        warm_up(problem, method, setting, PSEUDOCOUNT)
        warm = time.perf_counter() - begin
        if warm > args.budget:
            print(f"  {name:22s} warm-up {warm:8.2f} s: over budget", flush=True)
            continue
        build = 0.0
        if method is not None:
            begin = time.perf_counter()
            kept = approximate(problem.start, method, setting).hmm.transition
            build = time.perf_counter() - begin
        history = fit(
            problem.start,
            problem.training,
            approximation=method,
            setting=setting,
            iterations=args.iterations,
            tolerance=0.0,
            pseudocount=PSEUDOCOUNT,
        ).history
        e, m = statistics.median(history.e_step_seconds), statistics.median(history.m_step_seconds)
        stored = f"{getattr(kept, 'nnz', 0) / n:6.0f} a row" if method and "top" in method else ""
        print(
            f"  {name:22s} E {e:8.3f} s ({1e3 * e / tokens:6.2f} ms a step; build alone "
            f"{build:7.3f} s)  M {m:6.3f} s  iteration {e + m:8.3f} s  warm-up {warm:6.2f} s"
            f"  {stored}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["bell", "dirichlet", "lm"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[800, 2000, 5000])
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["exact", *sorted({m for m, _ in E_STEPS if m})],
        help="names (exact, topp_transitions...) or name:setting (topp_transitions:0.9)",
    )
    parser.add_argument("--sequences", type=int, default=10)
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--budget", type=float, default=120.0)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores, 1 thread")
    numba.set_num_threads(1)
    with threadpool_limits(1):
        for n in args.sizes:
            for family in args.families:
                measure(family, n, args)


if __name__ == "__main__":
    main()
