"""Benchmarks of the pipeline's kernels and sweep, run by hand:

    python benchmarks/bench.py            # everything (about 10 minutes on 2 cores)
    python benchmarks/bench.py kernels    # 1-3 only
    python benchmarks/bench.py sweep      # 4 only
    python benchmarks/bench.py lowrank    # 5 only
    python benchmarks/bench.py scipy      # 1e only: our CSR step against scipy.sparse's

Every comparison is measured side by side in this one run: alternating
repeats, medians, ratios. Machines are shared and noisy; trust the ratios.

1. prediction per time step, exact vs top-p sparse, for the paper's models
   (exact dense) and large structured ones (exact as peaks plus a flat
   background), with bytes per second against this machine's read bandwidth;
   the methods side by side (top-p, top-k, belief pruning: build, step, TV);
   the public API's per-call cost and ratios, one thread each and at the default
   threads; our CSR step against scipy.sparse's products (vector and batch);
   and a batch of 64 distributions as one block product vs a loop over them;
2. our dense filtering vs hmmlearn's forward pass on the same HMM;
3. gamma of the 7620-state LM HMM and the top-p build of its transitions;
4. sweep throughput on 1 and 2 workers, per-cell overhead, and the same grid
   as a Hydra multirun of single cells;
5. kernel HMMs: the kernel (low-rank) step against the dense step of the same
   matrix, n = 1000 to 10^6, with GB/s against the read bandwidth, and the
   banded kernel's step; training tokens per second (a gradient step of the
   evidence), full softmax against kernels of 4 and 8 states per feature.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from pipeline.hmmlm import evidence
from pipeline.hmmlm.parameters import gradient, initial, softmax_rows, transition_matrix
from pipeline.inference import filtering, predict
from pipeline.kernels import forward
from pipeline.methods import approximate
from pipeline.methods.topp import topp_hmm, topp_matrix
from pipeline.metrics import minimal_mixing_rate, total_variation
from pipeline.models import HMM, build_model
from pipeline.operators import toarray
from pipeline.sweep.provenance import blas, cpu, memory

REPEATS = 7
TARGETS: list[tuple[str, str, bool]] = []


def target(name: str, measured: str, met: bool) -> None:
    TARGETS.append((name, measured, met))


def median_time(function, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@numba.njit(fastmath=True)
def _compiled_sum(array):
    total = 0.0
    for i in range(array.size):
        total += array[i]
    return total


def timed(function, *args, **kwargs) -> float:
    """Seconds one call takes."""
    start = time.perf_counter()
    function(*args, **kwargs)
    return time.perf_counter() - start


def read_bandwidth() -> float:
    """Bytes per second of the fastest of three reductions over 1 GiB (far past the cache)."""
    array = np.ones(2**27)
    reductions = {
        "numpy sum": array.sum,
        "compiled sum": lambda: _compiled_sum(array),
        "BLAS dot(a, a)": lambda: np.dot(array, array),
    }
    rates = {}
    for name, reduction in reductions.items():
        reduction()
        rates[name] = array.nbytes / median_time(reduction, 5)
    print("   read bandwidth: " + ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in rates.items()))
    return max(rates.values())


def step_bytes(hmm) -> int:
    """Bytes one prediction step reads: every array of the transition's layout (values,
    indices, factors, a dense panel) and two vectors."""

    def size(part) -> int:
        return sum(size(p) for p in part) if isinstance(part, tuple) else part.nbytes

    return size(hmm.transition_layout) + 2 * 8 * hmm.n_states


def per_step(hmm, horizon: int, prune: float = 1.0) -> np.ndarray:
    """Seconds of each step of one prediction run (the kernel's own clock)."""
    return np.diff(filtering(hmm, np.full(horizon + 1, -1), prune=prune).elapsed)


def prediction(bandwidth: float) -> None:
    print(
        "\n1. Prediction per step: exact (dense or structured) vs top-p, 50 steps, median of"
        f" {REPEATS} alternating runs; GB/s against {bandwidth / 1e9:.1f} GB/s read bandwidth"
    )
    header = (
        f"   {'model':<30}{'nnz':>12}{'exact us':>11}{'top-p us':>11}{'speedup':>9}"
        f"{'exact GB/s':>12}{'top-p GB/s':>13}"
    )
    print(header)
    cases = [
        ("bell", 800, 0.9, {}),
        ("uniform", 800, 0.9, {}),
        ("lm", 7620, 0.9, {"alpha": 0}),
        ("lm", 7620, 0.9, {"alpha": 0.01}),
        ("lm", 7620, 0.5, {"alpha": 0.01}),
        ("lm", 7620, 0.9, {"alpha": 1e-4}),
        ("bell", 20000, 0.9, {}),
        ("lm", 7620, 0.9, {"structured": True}),
        ("bell", 100000, 0.9, {"structured": True}),
        ("peaked", 100000, 0.9, {"structured": True}),
    ]
    for family, n, p, params in cases:
        hmm = build_model(family, n, **params)
        top = topp_hmm(hmm, p)
        dense, sparse = [], []
        with threadpool_limits(1, user_api="blas"):
            for _ in range(REPEATS):  # alternate, so drifts hit both alike
                dense.append(per_step(hmm, 50))
                sparse.append(per_step(top, 50))
        d, s = float(np.median(dense)), float(np.median(sparse))
        dense_rate, sparse_rate = step_bytes(hmm) / d, step_bytes(top) / s
        name = f"{family} n={n} p={p:g}" + "".join(f" {k}={v:g}" for k, v in params.items())
        print(
            f"   {name:<30}{top.transition.nnz:>12,}{d * 1e6:>11.1f}"
            f"{s * 1e6:>11.1f}{d / s:>8.1f}x{dense_rate / 1e9:>7.1f} ({dense_rate / bandwidth:.0%})"
            f"{sparse_rate / 1e9:>7.1f} ({sparse_rate / bandwidth:.0%})"
        )
        if (family, n, p, params) == ("bell", 800, 0.9, {}):  # the paper's targets
            target("Bell (800) top-0.9 prediction vs exact > 15x", f"{d / s:.1f}x", d / s > 15)
        if (family, n, p, params) == ("lm", 7620, 0.9, {"alpha": 0}):
            target(
                "LM (7620, maximum likelihood) top-0.9 prediction vs exact > 18x",
                f"{d / s:.0f}x",
                d / s > 18,
            )
        if params.get("structured") or params.get("alpha") not in (None, 0.01):
            continue
        big = step_bytes(hmm) > 64 * 2**20
        if big:
            target(
                f"dense step >= 60% of read bandwidth ({family} {n})",
                f"{dense_rate / bandwidth:.0%}",
                dense_rate >= 0.6 * bandwidth,
            )
        if step_bytes(top) > 64 * 2**20:
            target(
                f"sparse step >= 50% of read bandwidth ({family} {n} p={p:g})",
                f"{sparse_rate / bandwidth:.0%}",
                sparse_rate >= 0.5 * bandwidth,
            )


METHOD_CASES = [
    ("bell", 800, {}),
    ("bell", 100000, {"structured": True}),
    ("dirichlet", 2000, {"alpha": 0.05}),
    ("lm", 2000, {}),
]
VARIANTS = [("topp", 0.9), ("topk", 5), ("topk", 20), ("topp_states", 0.9), ("topp_states", 0.99)]


def _built(hmm, method: str, setting: float):
    """An approximation and the seconds its build took, or the reason it was refused."""
    start = time.perf_counter()
    try:
        approximation = approximate(hmm, method, setting)
    except ValueError as error:
        return str(error), 0.0
    return approximation, time.perf_counter() - start


def methods() -> None:
    print(
        f"\n1c. Methods side by side: prediction per step (50 steps, median of {REPEATS} "
        "alternating runs), build time and TV at step 50"
    )
    print(f"   {'model':<34}{'method':<20}{'build s':>9}{'step us':>10}{'vs exact':>10}{'TV':>9}")
    for family, n, params in METHOD_CASES:
        hmm = build_model(family, n, **params)
        exact = predict(hmm, 50)
        built = {variant: _built(hmm, *variant) for variant in VARIANTS}
        refused = {v: built.pop(v)[0] for v in list(built) if isinstance(built[v][0], str)}
        runs = {key: [] for key in ["exact", *built]}
        with threadpool_limits(1, user_api="blas"):
            for _ in range(REPEATS):  # alternate, so drifts hit all alike
                runs["exact"].append(per_step(hmm, 50))
                for variant, (approximation, _) in built.items():
                    runs[variant].append(per_step(approximation.hmm, 50, approximation.prune))
        exact_step = float(np.median(runs["exact"]))
        name = f"{family} n={n}" + "".join(f" {k}={v}" for k, v in params.items())
        print(f"   {name:<34}{'exact':<20}{'':>9}{exact_step * 1e6:>10.1f}{'1.0x':>10}{0:>9.3f}")
        for (method, setting), reason in refused.items():
            print(f"   {'':<34}{f'{method} {setting:g}':<20} refused: {reason[:60]}")
        for (method, setting), (approximation, seconds) in built.items():
            step = float(np.median(runs[method, setting]))
            tv = total_variation(exact, predict(approximation.hmm, 50, prune=approximation.prune))
            print(
                f"   {'':<34}{f'{method} {setting:g}':<20}{seconds:>9.3f}{step * 1e6:>10.1f}"
                f"{exact_step / step:>9.1f}x{tv[-1]:>9.3f}"
            )


def _best(function, repeats: int) -> float:
    """The least time of ``repeats`` calls, in seconds (what a call costs, noise aside)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def public_api() -> None:
    print(
        "\n1d. Through the public API: predict(hmm, horizon) as a user calls it, best of 30; "
        "per-call cost, and top-0.9 against exact over 50 steps"
    )
    bell = build_model("bell", 800)
    models = {
        "dense": bell,
        "CSR (top-0.9)": topp_hmm(bell, 0.9),
        "structured": build_model("bell", 800, structured=True),
    }
    with threadpool_limits(1, user_api="blas"):
        for name, hmm in models.items():
            predict(hmm, 1)
            empty = _best(lambda hmm=hmm: predict(hmm, 0), 300)
            one = _best(lambda hmm=hmm: predict(hmm, 1), 300)
            print(
                f"   bell n=800 {name:<14} a call of 0 steps {empty * 1e6:6.1f} us, "
                f"of 1 step {one * 1e6:6.1f} us"
            )
        overhead = _best(lambda: predict(models["CSR (top-0.9)"], 1), 300)
    target(
        "per-call cost, one step of top-0.9 Bell 800 <= 10 us",
        f"{overhead * 1e6:.1f} us",
        overhead <= 10e-6,
    )
    cases = [("bell", 800, {}), ("bell", 20000, {}), ("lm", 7620, {"alpha": 0})]
    for threads, label in ((1, "one thread each"), (None, "default threads")):
        for family, n, params in cases:
            hmm = build_model(family, n, **params)
            top = topp_hmm(hmm, 0.9)
            with threadpool_limits(threads, user_api="blas"), numba_threads(threads):
                exact = _best(lambda hmm=hmm: predict(hmm, 50), 30 if n <= 800 else 5)
                sparse = _best(lambda top=top: predict(top, 50), 30)
            name = f"{family} n={n}" + "".join(f" {k}={v}" for k, v in params.items())
            print(
                f"   {label:<16} {name:<22} exact {exact * 1e3:9.2f} ms   top-0.9 "
                f"{sparse * 1e3:8.3f} ms   {exact / sparse:8.1f}x"
            )
            if (family, n, threads) == ("bell", 800, 1):
                target(
                    "Bell 800 top-0.9 through the API >= 18x exact, one thread each",
                    f"{exact / sparse:.1f}x",
                    exact / sparse >= 18,
                )


@contextlib.contextmanager
def numba_threads(threads: int | None):
    """numba's threads (the parallel CSR step's) fixed to ``threads`` (None: all), restored."""
    before = numba.get_num_threads()
    numba.set_num_threads(threads or numba.config.NUMBA_NUM_THREADS)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _scipy_recursion(T, start: np.ndarray, steps: int) -> np.ndarray:
    """Seconds of each step of scipy's recursion that keeps the history as ours does:
    ``history[t] = history[t - 1] @ T`` (a vector) or ``T.T @ history[t - 1]`` (a
    state-major block); scipy has no output argument, so each product is copied in."""
    history = np.zeros((steps, *start.shape))
    history[0] = start
    product = (lambda x: x @ T) if start.ndim == 1 else (lambda x: T.T @ x)
    times = []
    for t in range(1, steps):
        begin = time.perf_counter()
        history[t] = product(history[t - 1])
        times.append(time.perf_counter() - begin)
    return np.array(times)


def _scipy_alone(T, start: np.ndarray):
    """scipy's step on the same input every call: ``start @ T`` or ``T.T @ start``."""
    return (lambda: start @ T) if start.ndim == 1 else (lambda: T.T @ start)


def _ours_alone(layout, start: np.ndarray):
    """Our step of ``layout``, as the recursion takes it, on the same arrays every call."""
    out = np.empty_like(start)
    if start.ndim == 2:
        return lambda: forward.step_block(layout, start, out)
    return lambda: forward.step(layout, start, out, 1)


def against_scipy() -> None:
    print(
        "\n1e. Our CSR step (as the matrix's layout takes it: CsrEntries/CsrRows scatter the "
        "entries, CsrPanel steps the mostly full columns as a dense panel by BLAS) against "
        "scipy.sparse (csr_array), one thread, a vector "
        "(belief @ T) and a batch of B (T.T @ block); scipy's time over ours, alone (one step "
        "on the same arrays every call; scipy allocates its output) and in the recursion (each "
        "step writes its result to the next slice of the history: ours is filtering's, "
        "scipy's history[t] = T.T @ history[t - 1]); the median ratio of 15 pairs run side by "
        "side (7 above 10 million entries); and our vector step "
        f"on all {numba.config.NUMBA_NUM_THREADS} threads of numba and BLAS (the parallel "
        "scatter from 50,000 entries on, the panel's BLAS product)"
    )
    cases = [
        ("bell", 800, 0.9, {}),
        ("bell", 20000, 0.9, {}),
        ("lm", 7620, 0.9, {"alpha": 0, "structured": True}),
        ("lm", 7620, 0.5, {"structured": True}),
        ("lm", 7620, 0.9, {"structured": True}),
    ]
    rng = np.random.default_rng(0)
    slowest = {"recursion": (np.inf, ""), "alone": (np.inf, "")}
    with threadpool_limits(1, user_api="blas"), numba_threads(1):
        for family, n, p, params in cases:
            top = topp_hmm(build_model(family, n, **params), p)
            T = top.transition
            name = f"{family} n={n} p={p:g}" + "".join(
                f" {k}={v}" for k, v in params.items() if k != "structured"
            )
            row = f"   {name:<26} {T.nnz / n:5.0f}/row {type(top.transition_layout).__name__:<10}"
            for size in (None, 16, 64):
                initial = rng.dirichlet(np.ones(n), size=size)
                start = initial if size is None else np.ascontiguousarray(initial.T)
                ours, theirs = _ours_alone(top.transition_layout, start), _scipy_alone(T, start)
                observations = np.full(6 if size is None else (size, 6), -1)
                ratios, steps = {"alone": [], "recursion": []}, []
                for _ in range(7 if T.nnz > 10**7 else 15):  # pairs side by side, both warm
                    ours()
                    mine = timed(ours)
                    theirs()
                    ratios["alone"].append(timed(theirs) / mine)
                    run = np.diff(filtering(top, observations, initial=initial).elapsed)
                    steps.extend(run)
                    recursion = _scipy_recursion(T, start, 6)
                    ratios["recursion"].append(np.median(recursion) / np.median(run))
                median = {key: float(np.median(value)) for key, value in ratios.items()}
                if size is None:
                    vector = float(np.median(steps))
                    row += f" | vector ours {vector * 1e6:8.1f} us"
                label = "vector" if size is None else f"B={size}"
                row += f" | {label} {median['alone']:5.2f}x {median['recursion']:5.2f}x"
                for key in ("recursion", "alone"):
                    slowest[key] = min(slowest[key], (median[key], f"{name} {label}"))
            threaded = []
            for _ in range(7):  # pairs side by side: one thread, then all
                one = np.median(per_step(top, 15))
                with numba_threads(None), threadpool_limits(os.cpu_count(), user_api="blas"):
                    threaded.append(one / np.median(per_step(top, 15)))
            row += f" | all threads {np.median(threaded):4.2f}x"
            print(row)
            if isinstance(top.transition_layout, forward.CsrPanel):
                _panel_gain(top, name)
    for key, (ratio, where) in slowest.items():
        target(
            f"our CSR step at least as fast as scipy's {key}, every shape",
            f"least {ratio:.2f}x ({where})",
            ratio >= 1,
        )


def _panel_gain(top: HMM, name: str) -> None:
    """The step of ``top``'s CSR transitions as its layout takes it (the mostly full columns
    as a dense panel, ``pipeline.operators.csr.PANEL_DENSITY``) against the whole matrix
    scattered: the median ratio of 7 pairs side by side."""
    panel, T = top.transition_layout, top.transition
    scattered = forward.CsrRows(T.indptr, T.indices, T.data)
    rng = np.random.default_rng(2)
    row = f"   {name}: {panel.columns.size} columns in the panel"
    for size in (None, 16, 64):
        initial = rng.dirichlet(np.ones(top.n_states), size=size)
        start = initial if size is None else np.ascontiguousarray(initial.T)
        steps = [_ours_alone(layout, start) for layout in (scattered, panel)]
        ratios = []
        for _ in range(7):
            times = []
            for step in steps:
                step()
                times.append(timed(step))
            ratios.append(times[0] / times[1])
        row += f" | {'vector' if size is None else f'B={size}'} {np.median(ratios):4.2f}x"
    print(row + " faster than the whole matrix scattered")


def _one_by_one(model, initial) -> None:
    for distribution in initial:
        predict(model, 50, initial=distribution)


def batches() -> None:
    print("\n1b. A batch of initial distributions: one block product per step vs a loop")
    rng = np.random.default_rng(0)
    for family, n, p, size in (("bell", 800, 0.9, 64), ("lm", 7620, 0.5, 8)):
        hmm = build_model(family, n)
        top = topp_hmm(hmm, p)
        initial = rng.dirichlet(np.ones(n), size=size)
        for label, model in (("exact dense", hmm), (f"top-{p:g} sparse", top)):
            with threadpool_limits(1, user_api="blas"):
                block, loop = [], []
                for _ in range(3):
                    block.append(timed(predict, model, 50, initial=initial))
                    loop.append(timed(_one_by_one, model, initial))
            b, l = statistics.median(block), statistics.median(loop)
            print(
                f"   {family} n={n} B={size:<3} {label:<16} block {b * 1e3:8.1f} ms   "
                f"loop {l * 1e3:8.1f} ms   {l / b:4.1f}x"
            )


def batch_through_the_api() -> None:
    print(
        "\n1f. A batch through the public API: filtering(top, observations, initial=B) for 64 "
        "beliefs on the top-0.9 Bell model of 20,000 states, horizon 20, one thread: the whole "
        "call against its own compiled steps (elapsed[-1], which write the returned history and "
        "so map its pages, as scipy's loop maps its own) and against scipy's loop that keeps "
        "the same history, medians of 7; then the call that keeps only the last step "
        "(history=False) against its steps"
    )
    hmm = build_model("bell", 20_000, structured=True)
    top = topp_hmm(hmm, 0.9)
    rng = np.random.default_rng(0)
    initial = rng.dirichlet(np.ones(hmm.n_states), size=64)
    observations = np.full(21, -1)
    observations[::5] = rng.integers(0, hmm.n_observations, size=5)
    filtering(top, observations, initial=initial)  # compiled and cached before timing
    times = {key: [] for key in ("call", "steps", "scipy", "last call", "last steps")}
    with threadpool_limits(1, user_api="blas"), numba_threads(1):
        for _ in range(7):
            for history, prefix in ((True, ""), (False, "last ")):
                begin = time.perf_counter()
                result = filtering(top, observations, initial=initial, history=history)
                times[prefix + "call"].append(time.perf_counter() - begin)
                times[prefix + "steps"].append(result.elapsed[-1])
            times["scipy"].append(_scipy_recursion(top.transition, initial.T.copy(), 21).sum())
    call, own, scipy, last, last_own = (statistics.median(x) for x in times.values())
    print(
        f"   call {call * 1e3:7.1f} ms   its steps {own * 1e3:7.1f} ms ({call / own:4.2f}x)   "
        f"scipy's loop {scipy * 1e3:7.1f} ms: through filtering() {scipy / call:4.2f}x scipy\n"
        f"   history=False: call {last * 1e3:7.1f} ms   its steps {last_own * 1e3:7.1f} ms "
        f"({last / last_own:4.2f}x)   {scipy / last:4.2f}x scipy's loop with its history"
    )
    target("a batch call within 1.1x of its own steps", f"{call / own:.2f}x", call / own <= 1.1)
    target(
        "a batch call, history=False, within 1.1x of its own steps",
        f"{last / last_own:.2f}x",
        last / last_own <= 1.1,
    )


def against_hmmlearn() -> None:
    from hmmlearn.hmm import CategoricalHMM

    print("\n2. Dense filtering vs hmmlearn's forward pass (same HMM, 200 observed steps)")
    for n in (800, 1000, 2000):
        hmm = build_model("dirichlet", n, seed=1, alpha=1.0)
        observations = np.random.default_rng(0).integers(0, n, 200)
        reference = CategoricalHMM(n_components=n, n_features=n, implementation="scaling")
        reference.startprob_, reference.transmat_ = hmm.prior, hmm.transition
        reference.emissionprob_ = hmm.emission
        with threadpool_limits(1, user_api="blas"):
            ours, theirs = [], []
            for _ in range(REPEATS):
                ours.append(timed(filtering, hmm, observations))
                theirs.append(timed(reference.score, observations[:, None]))
        o, t = statistics.median(ours), statistics.median(theirs)
        print(
            f"   n={n:<6} ours {o * 1e3:8.2f} ms   hmmlearn {t * 1e3:8.2f} ms   ratio {t / o:5.1f}x"
        )
        if n == 1000:
            target("dense filtering >= 3x hmmlearn (1000 states)", f"{t / o:.1f}x", t / o >= 3)


def lm_costs() -> None:
    print("\n3. The 7620-state smoothed LM HMM (k = 0.01): gamma and the top-p build")
    start = time.perf_counter()
    hmm = build_model("lm", 7620)
    print(f"   model build (corpus read once): {time.perf_counter() - start:.1f} s")
    for threads in (1, 2):
        seconds = statistics.median(
            timed(minimal_mixing_rate, hmm.transition, threads=threads) for _ in range(3)
        )
        print(f"   gamma, {threads} thread(s): {seconds:.2f} s")
        if threads == 1:
            target("gamma of the LM (7620) <= 30 s, one thread", f"{seconds:.1f} s", seconds <= 30)
    for p in (0.5, 0.9):
        runs = [timed(topp_matrix, hmm.transition, p) for _ in range(7)]
        seconds = statistics.median(runs)
        nnz = topp_matrix(hmm.transition, p).nnz
        print(
            f"   top-{p:g} build of the transitions: {seconds:.2f} s, median of 7 "
            f"({min(runs):.2f} to {max(runs):.2f} s; {nnz:,} entries kept)"
        )
        if p == 0.9:
            target("top-0.9 build of the LM (7620) <= 1 s", f"{seconds:.2f} s", seconds <= 1)


def lowrank_steps(bandwidth: float) -> None:
    print(
        "\n5. Kernel HMMs: a kernel step (two thin BLAS products, F = 64 features) against the "
        f"dense step of the same matrix, 20 steps, median of {REPEATS} alternating runs, one "
        f"BLAS thread; GB/s against {bandwidth / 1e9:.1f} GB/s read bandwidth"
    )
    print(
        f"   {'model':<28}{'dense us':>11}{'kernel us':>11}{'speedup':>9}"
        f"{'dense GB/s':>12}{'kernel GB/s':>13}"
    )
    with threadpool_limits(1):
        for family, n in [
            ("kernel", 1000),
            ("kernel", 4000),
            ("kernel", 10000),
            ("banded_kernel", 10000),
            ("kernel", 100000),
            ("banded_kernel", 100000),
            ("kernel", 1000000),
        ]:
            hmm = build_model(family, n)
            runs = {"kernel": hmm}
            if n <= 10000:
                runs["dense"] = HMM(hmm.prior, toarray(hmm.transition), hmm.emission)
            times = {name: [] for name in runs}
            for _ in range(REPEATS):
                for name, model in runs.items():
                    times[name].append(np.median(per_step(model, 20)))
            step = {name: statistics.median(values) for name, values in times.items()}
            dense = step.get("dense", float("nan"))
            rate = {name: step_bytes(model) / step[name] / 1e9 for name, model in runs.items()}
            print(
                f"   {family + f' {n:,}':<28}{dense * 1e6:>11.1f}{step['kernel'] * 1e6:>11.1f}"
                f"{dense / step['kernel']:>8.1f}x{rate.get('dense', float('nan')):>12.1f}"
                f"{rate['kernel']:>13.1f}"
            )
            del runs, hmm


def training_rates() -> None:
    print(
        "\n5b. Training HMM LMs: tokens per second of one gradient step (forward-backward "
        "and the gradient) on 32 chunks of 64 tokens, 1000 words, median of 5, one BLAS thread"
    )
    print(f"   {'n_states':>9}{'softmax':>12}{'kernel 4:1':>12}{'kernel 8:1':>12}")
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 1000, (32, 64))
    with threadpool_limits(1):
        for n in (512, 1024, 2048, 4096):
            rates = []
            for kind, features in (("softmax", 0), ("kernel", n // 4), ("kernel", n // 8)):
                p = initial(kind, n, 1000, n_features=features)

                def step(p=p):
                    T = transition_matrix(p.transition)
                    prior, emission = softmax_rows(p.prior), softmax_rows(p.emission)
                    gradient(p, evidence.statistics(prior, T, emission, tokens), len(tokens))

                rates.append(tokens.size / median_time(step, 5))
            print(f"   {n:>9}" + "".join(f"{rate:>12,.0f}" for rate in rates))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "part",
        nargs="?",
        choices=["all", "kernels", "scipy", "batch", "sweep", "lowrank"],
        default="all",
    )
    part = parser.parse_args().part
    print(
        f"machine: {platform.node()}: {cpu()}, {os.cpu_count()} cores, {memory()}; "
        f"BLAS {blas()} (1 thread while timing); Python {platform.python_version()}"
    )
    if part in ("all", "kernels"):
        bandwidth = read_bandwidth()
        prediction(bandwidth)
        methods()
        public_api()
        against_scipy()
        batches()
        batch_through_the_api()
        against_hmmlearn()
        lm_costs()
    if part == "scipy":
        against_scipy()
    if part == "batch":
        batch_through_the_api()
    if part in ("all", "lowrank"):
        lowrank_steps(bandwidth if part == "all" else read_bandwidth())
        training_rates()
    if part in ("all", "sweep"):
        from sweep_throughput import throughput

        throughput(target)
    print("\nTargets")
    for name, measured, met in TARGETS:
        print(f"   [{'met' if met else 'MISSED'}] {name}: {measured}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
