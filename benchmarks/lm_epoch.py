"""One training step of a blocked HMM LM, whole and by part, against its arithmetic bound,
run by hand:

    python benchmarks/lm_epoch.py                                  # kernel_4 at 2^12
    python benchmarks/lm_epoch.py --states 4096 16384 --threads 1 2
    python benchmarks/lm_epoch.py --parameterisations kernel_4 neural softmax

The step is what ``pipeline.hmmlm.train`` runs per batch with ``experiment=lm_scaling``'s
recipe: 32 streams, a segment of 64 tokens each carried from the one before (2,048 tokens),
256 word clusters, embeddings of d = 32, F = n / 4 features capped at 1,024, float32: the
gradient, its clipping and Adam. The corpus is synthetic (``--words`` words drawn by a Zipf
law, randomly clustered), so nothing needs fetching; a step's arithmetic does not depend on
which words it reads. An epoch is ``EPOCH_STEPS`` steps (Austen's 610,112 training tokens),
without its validation.

The parts, timed apart on the same segments (what the step calls, in its order): the
emission blocks (the sub-model's prior and emission softmax, the emission gradient, the
gradient scattered back), the transitions' blocks (for the kernel, its features ``L`` and
``R``), the forward recursion, the backward recursion (forward-backward less forward), the
transitions' gradient (for the kernel, the gradient of its features), and the optimiser
(clipping and Adam); "rest" is the step less its parts.

The bound is ``reports/lm``'s: the multiply-adds a step cannot avoid at one core's sgemm
rate (``RATE``, float32), for the kernel ``6 n F d`` (its features and their gradient) plus
``6 k F`` a token (forward, backward, the gradient's contraction), for the neural model
``4 n^2 d`` (its normalisers and their gradient), and for the softmax the ``48 n^2`` bytes
it must stream at ``BANDWIDTH``. It is one core's, whatever ``--threads``. The sgemm rate
this machine reaches on one core (1024^3) is printed beside it.

Threads: numba's and BLAS's, set per run (``--threads``); nothing is pinned. The process
starts as a sweep's worker does (``pipeline.environment.WORKER_ENVIRONMENT``, set before
numpy loads unless the environment has them): idle threads sleep, and arrays of a few MiB
reuse the heap; ``--spinning`` leaves the libraries' defaults instead (threads that spin
between parallel steps), to compare. A figure is wall
time, or with ``--clock cpu`` the process's CPU time (on a shared machine, one thread's figure
as if alone; with two threads the sum of both). Each figure is the median over
``--repeats`` rounds that run the whole step and its parts in turn, after one untimed round
of each (compilation, first touch); a step is the mean over ``--steps`` consecutive
segments. The machine may be shared and noisy: the load average is printed before and
after.
"""

from __future__ import annotations

import os
import sys

from pipeline.environment import WORKER_ENVIRONMENT

os.environ.setdefault("NUMBA_NUM_THREADS", str(len(os.sched_getaffinity(0))))
if "--spinning" not in sys.argv:
    for _name, _value in WORKER_ENVIRONMENT.items():
        os.environ.setdefault(_name, _value)

import argparse
import platform
import statistics
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from pipeline.hmmlm import blocked
from pipeline.hmmlm import blocks as blocked_model
from pipeline.hmmlm import train as training
from pipeline.hmmlm.clusters import blocks_of, random_partition
from pipeline.hmmlm.parameters import initial, parse, softmax_rows
from pipeline.hmmlm.workspace import Workspace
from pipeline.sweep.provenance import blas, cpu, memory

RATE = 100e9
"""Flop/s of one core's sgemm that the bound assumes (``reports/lm``)."""
BANDWIDTH = 15e9
"""Bytes/s of one core's stream that the softmax's bound assumes (``reports/lm``)."""
EPOCH_STEPS = 298
"""Steps of an epoch of Austen (610,112 tokens as 32 x 64-token segments)."""
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
"""What ``--clock`` may name."""
STREAMS, LENGTH, CLUSTERS, DIM, MAX_FEATURES = 32, 64, 256, 32, 1024
"""``experiment=lm_scaling``'s recipe."""


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def bound(kind: str, n: int, features: int) -> float:
    """Seconds of one step at the rates above (the module's docstring)."""
    tokens, k = STREAMS * LENGTH, n // CLUSTERS
    if kind == "kernel":
        return 2 * (6 * n * features * DIM + 6 * k * features * tokens) / RATE
    if kind == "neural":
        return 2 * 4 * n * n * DIM / RATE
    return 48 * n * n / BANDWIDTH


def sgemm_rate() -> float:
    """Flop/s of a 1024^3 float32 product on one thread."""
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        a @ a
        times = []
        for _ in range(5):
            start = time.perf_counter()
            a @ a
            times.append(time.perf_counter() - start)
    return 2 * 1024**3 / min(times)


class Problem:
    """A model of ``n`` states of one parameterisation, its synthetic streams and the state
    a training run keeps (its Adam moments, its workspace)."""

    def __init__(self, name: str, n: int, words: int, steps: int) -> None:
        self.kind, self.features, _ = parse(name, n, MAX_FEATURES)
        self.name, self.n, self.steps = name, n, steps
        self.blocks = blocks_of(random_partition(words, CLUSTERS, seed=0), n // CLUSTERS)
        self.p = initial(self.kind, n, words, n_features=self.features, dim=DIM,
                         emission_size=self.blocks.states * words, dtype=np.float32)  # fmt: skip
        rng = np.random.default_rng(0)
        self.streams = (rng.zipf(1.3, (STREAMS, LENGTH * (steps + 1))) - 1) % words
        self.leaves = training._leaves(self.p)
        self.moments = [[np.zeros_like(x) for x in self.leaves] for _ in range(2)]
        self.work = Workspace()
        self.r = training._sub_models(self.p, self.blocks, 0.0, np.random.default_rng(0))()
        self.carry, self.previous = self._carried()

    def _carried(self):
        """The carry into the first timed segment: the first segment's last beliefs."""
        _, carry = training._batch_gradient(
            self.p, self.streams[:, :LENGTH], self.blocks, self.r, self.work, None, None
        )
        return carry, self.streams[:, LENGTH - 1]

    def segments(self):
        """``(tokens, carry, previous)`` of every timed segment, the carry held fixed."""
        for i in range(1, self.steps + 1):
            yield (
                self.streams[:, i * LENGTH : (i + 1) * LENGTH],
                self.carry,
                self.streams[:, i * LENGTH - 1],
            )

    def step(self) -> None:
        """``--steps`` training steps as ``train`` runs them (the gradient, clip, Adam)."""
        for tokens, carry, previous in self.segments():
            grad, _ = training._batch_gradient(
                self.p, tokens, self.blocks, self.r, self.work, carry, previous
            )
            self._adam(training._leaves(grad), 1.0 / tokens.size)

    def _adam(self, grads, scale) -> None:
        scale = training._clipped_scale(grads, scale, 5.0)
        for x, g, m, v in zip(self.leaves, grads, *self.moments, strict=True):
            # a tiny rate: the timed steps barely move the model
            training._adam(x.ravel(), g.ravel(), m.ravel(), v.ravel(), 1e-9, scale, 0.9, 0.999,
                           0.1, 0.001)  # fmt: skip

    def parts(self, clock) -> dict[str, float]:
        """Seconds of each part over the ``--steps`` segments (the module's docstring)."""
        seconds = dict.fromkeys(
            ["emission blocks", "transition blocks", "forward", "backward",
             "transition gradient", "optimiser"], 0.0)  # fmt: skip
        for tokens, carry, previous in self.segments():
            t0 = clock()
            sub = blocked_model.restrict(self.p, self.r, self.work)
            prior = softmax_rows(sub.prior)
            emission = blocked_model.emission_probabilities(sub.emission, self.r.blocks)
            coded = blocked.code(blocked_model._with_previous(tokens, previous), self.blocks)
            start = blocked_model.carry_in(carry, coded.cluster[:, 0], self.r)
            t1 = clock()
            kind = blocked_model._KINDS[type(sub.transition)]
            state = kind.setup(sub.transition, self.r, self.work)
            T = kind.blocks(state, coded, self.r.blocks.states)
            t2 = clock()
            blocked.log_evidence(prior, emission, self.r.blocks, T, coded, start)
            t3 = clock()
            s = blocked.statistics(prior, emission, self.r.blocks, T, coded, start)
            t4 = clock()
            d_transition = kind.gradient(sub.transition, state, T, s, self.r, self.work)
            t5 = clock()
            d_emission = blocked_model.emission_gradient(s.emission_counts, emission, self.r.blocks)
            # carried segments: no sequence starts from the prior
            prior_gradient = s.posterior_start.astype(sub.prior.dtype)
            grad = sub._replace(prior=prior_gradient, emission=d_emission, transition=d_transition)
            grad = blocked_model.expand(grad, self.r, self.p, self.work)
            t6 = clock()
            self._adam(training._leaves(grad), 1.0 / tokens.size)
            t7 = clock()
            seconds["emission blocks"] += (t1 - t0) + (t6 - t5)
            seconds["transition blocks"] += t2 - t1
            seconds["forward"] += t3 - t2
            seconds["backward"] += (t4 - t3) - (t3 - t2)
            seconds["transition gradient"] += t5 - t4
            seconds["optimiser"] += t7 - t6
        return seconds


def measure(problem: Problem, threads: int, repeats: int, clock) -> None:
    numba.set_num_threads(threads)
    with threadpool_limits(limits=threads, user_api="blas"):
        problem.step()  # compilation, first touch
        problem.parts(clock)
        steps, parts = [], []
        for _ in range(repeats):
            start = clock()
            problem.step()
            steps.append((clock() - start) / problem.steps)
            parts.append({k: v / problem.steps for k, v in problem.parts(clock).items()})
    step = statistics.median(steps)
    limit = bound(problem.kind, problem.n, problem.features)
    print(
        f"\n{problem.name} n={problem.n} (k={problem.n // CLUSTERS}, F={problem.features}), "
        f"{threads} thread(s): step {step * 1e3:.1f} ms, epoch {step * EPOCH_STEPS:.1f} s, "
        f"bound {limit * EPOCH_STEPS:.1f} s: {step / limit:.2f}x; {load()}"
    )
    named = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
    named["rest"] = step - sum(named.values())
    for name, value in named.items():
        print(f"  {name:20s} {value * 1e3:7.1f} ms  {value / step:6.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--states", type=int, nargs="+", default=[4096])
    parser.add_argument("--parameterisations", nargs="+", default=["kernel_4"])
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--steps", type=int, default=4, help="segments a timed step averages")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--words", type=int, default=10_000, help="vocabulary size")
    parser.add_argument(
        "--spinning",
        action="store_true",
        help="the libraries' default environment, not a sweep worker's (read before numpy "
        "loads: the module's docstring)",
    )
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="what a figure counts: wall time, or the process's CPU time (all its threads; "
        "on a shared machine with one thread, what it would take alone)",
    )
    args = parser.parse_args()
    print(
        f"{args.clock} time; {platform.node()}: {cpu()}, {memory()}, {blas()}, "
        f"numpy {np.__version__}, numba {numba.__version__}; "
        f"one core's sgemm {sgemm_rate() / 1e9:.0f} GFlop/s "
        f"(the bound assumes {RATE / 1e9:.0f}); {time.strftime('%Y-%m-%d %H:%M %Z')}; {load()}"
    )
    print(
        "environment: "
        + ", ".join(f"{name}={os.environ.get(name, '(unset)')}" for name in WORKER_ENVIRONMENT)
    )
    for n in args.states:
        for name in args.parameterisations:
            problem = Problem(name, n, args.words, args.steps)
            for threads in args.threads:
                measure(problem, threads, args.repeats, CLOCKS[args.clock])
    print(f"\n{load()}")


if __name__ == "__main__":
    main()
