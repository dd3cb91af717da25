"""Benchmarks of filtering, smoothing, Viterbi decoding and the batched dense step, run by
hand in the optional benchmark environment (its own venv: ``pip install -e ".[bench]"``):

    python benchmarks/inference.py              # everything (about 20 minutes on 2 cores)
    python benchmarks/inference.py dense        # 1 only
    python benchmarks/inference.py topp         # 2 only
    python benchmarks/inference.py structured   # 3 only
    python benchmarks/inference.py batch        # 4 only

1. exact dense filtering, smoothing and Viterbi against the same recursions in plain
   jit-compiled JAX written as a ``lax.scan`` of ``q @ A`` with normalisation, dynamax's
   jit-compiled ``hmm_filter``, ``hmm_smoother`` and ``hmm_posterior_mode``, and hmmlearn's
   ``predict_proba`` and ``decode``, at 100, 1000 and 4000 states over 200 steps;
2. top-p 0.9 smoothing and Viterbi against the exact dense ones on Bell 20,000, with what
   the approximation does to the posteriors (TV) and to the path;
3. smoothing and Viterbi of the structured Bell model of 10^6 states over horizon 50:
   time and peak memory (each run in a fresh process), whole and from checkpoints;
4. the batched dense step (64 members, 1000 states, 50 steps) against a numpy loop over
   ``(B, n) @ A``, and against the steps it took before on a state-major history: the
   member-major product between two transposes, and the state-major product.

Everything runs on one thread, pinned to one core (the last, or ``BENCH_CPU``), so every
implementation meets the same core and the same neighbours: the thread counts of BLAS,
numba and XLA are set below, before any of them starts. Comparisons are measured side by
side in one run, alternating repeats; medians and ratios are printed with the machine and
its load. The machine may be shared and noisy: trust the ratios, and re-run on a quiet
machine for the figures.
"""

from __future__ import annotations

import os

for _variable in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
):
    os.environ[_variable] = "1"
os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
CORE = int(os.environ.get("BENCH_CPU", max(os.sched_getaffinity(0))))
os.sched_setaffinity(0, {CORE})

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.inference import filtering, predict, sample, smoothing, viterbi  # noqa: E402
from pipeline.kernels import forward  # noqa: E402
from pipeline.methods import approximate  # noqa: E402
from pipeline.metrics import total_variation  # noqa: E402
from pipeline.models import HMM, build_model  # noqa: E402
from pipeline.sweep.provenance import blas, cpu, memory  # noqa: E402

HORIZON = 200
"""Steps of the dense comparisons (part 1)."""


def medians(functions: dict, repeats: int) -> dict[str, float]:
    """Seconds of each function's call, median of ``repeats`` rounds that call each in turn
    (after one call each to compile and warm)."""
    for function in functions.values():
        function()
    times = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


# --- 1. dense: plain JAX, dynamax, hmmlearn ------------------------------------------------


def _jax_recursions():
    """Filtering, smoothing and Viterbi in plain JAX, jit-compiled, the forward step written
    ``q @ A``: the scaled recursions ours run (probabilities, each message divided by its sum
    or max)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def forward(prior, A, L):
        def step(q, likelihood):
            q = (q @ A) * likelihood
            total = q.sum()
            return q / total, (q / total, jnp.log(total))

        first = prior * L[0]
        _, (alphas, logs) = lax.scan(step, first / first.sum(), L[1:])
        alphas = jnp.concatenate([(first / first.sum())[None], alphas])
        return alphas, jnp.log(first.sum()) + logs.sum()

    @jax.jit
    def smoother(prior, A, L):
        alphas, log_evidence = forward(prior, A, L)

        def backward_step(beta, inputs):
            likelihood, alpha = inputs
            beta = A @ (likelihood * beta)
            beta = beta / beta.sum()
            posterior = alpha * beta
            return beta, posterior / posterior.sum()

        _, posteriors = lax.scan(
            backward_step, jnp.ones_like(prior), (L[1:], alphas[:-1]), reverse=True
        )
        return jnp.concatenate([posteriors, alphas[-1:]]), log_evidence

    @jax.jit
    def decoder(prior, A, L):
        def step(delta, likelihood):
            products = delta[:, None] * A
            best = products.max(axis=0) * likelihood
            return best / best.max(), products.argmax(axis=0)

        first = prior * L[0]
        delta, back = lax.scan(step, first / first.max(), L[1:])

        def trace(state, pointers):
            return pointers[state], state

        start, path = lax.scan(trace, delta.argmax(), back, reverse=True)
        return jnp.concatenate([start[None], path])

    return jax.jit(forward), smoother, decoder


def dense() -> None:
    import jax
    from dynamax.hidden_markov_model import inference as dynamax

    jax.config.update("jax_enable_x64", True)
    plain = dict(zip(("filter", "smoother", "decoder"), _jax_recursions(), strict=True))
    tools = {
        "plain": plain,
        "dynamax filter": jax.jit(lambda p, A, logs: dynamax.hmm_filter(p, A, logs).filtered_probs),
        # Only the posteriors leave the compiled function: XLA drops the transition
        # probabilities dynamax computes by default (its flag cannot be set under jit).
        "dynamax smoother": jax.jit(
            lambda p, A, logs: dynamax.hmm_smoother(p, A, logs).smoothed_probs
        ),
        "dynamax mode": jax.jit(dynamax.hmm_posterior_mode),
    }
    print(
        f"\n1. Exact dense filtering, smoothing and Viterbi, {HORIZON} steps, 20 symbols, one "
        "thread; seconds (median) and ours over each (at most 1.00x: ours at least as fast)"
    )
    for n in (100, 1000, 4000):
        _dense_size(n, tools)


def _dense_size(n: int, tools: dict) -> None:
    """Part 1 at ``n`` states: every implementation on one random dense HMM."""
    import jax
    import jax.numpy as jnp
    from hmmlearn.hmm import CategoricalHMM

    rng = np.random.default_rng(n)
    hmm = HMM(
        rng.dirichlet(np.ones(n)),
        rng.dirichlet(np.ones(n), size=n),
        rng.dirichlet(np.ones(20), size=n),
    )
    observations = sample(hmm, HORIZON - 1, seed=n).observations
    reference = CategoricalHMM(n_components=n, n_features=20, implementation="scaling")
    reference.startprob_, reference.transmat_ = hmm.prior, hmm.transition
    reference.emissionprob_ = hmm.emission
    symbols = observations[:, None]
    likelihoods = np.ascontiguousarray(hmm.emission[:, observations].T)
    arrays = [jnp.asarray(a) for a in (hmm.prior, hmm.transition, likelihoods)]
    logged = (arrays[0], arrays[1], jnp.log(arrays[2]))
    plain = tools["plain"]

    def ready(value):
        return jax.block_until_ready(value)

    runs = {
        "filtering": {
            "ours": lambda: filtering(hmm, observations).beliefs,
            "plain JAX q @ A": lambda: ready(plain["filter"](*arrays)[0]),
            "dynamax hmm_filter": lambda: ready(tools["dynamax filter"](*logged)),
        },
        "smoothing": {
            "ours": lambda: smoothing(hmm, observations).posteriors,
            "plain JAX q @ A": lambda: ready(plain["smoother"](*arrays)[0]),
            "dynamax hmm_smoother": lambda: ready(tools["dynamax smoother"](*logged)),
            "hmmlearn predict_proba": lambda: reference.predict_proba(symbols),
        },
        "viterbi": {
            "ours": lambda: viterbi(hmm, observations).path,
            "plain JAX q @ A": lambda: ready(plain["decoder"](*arrays)),
            "dynamax hmm_posterior_mode": lambda: ready(tools["dynamax mode"](*logged)),
            "hmmlearn decode": lambda: reference.decode(symbols, algorithm="viterbi")[1],
        },
    }
    repeats = {100: 51, 1000: 15}.get(n, 5)  # a call of 100 states takes a millisecond
    for name, functions in runs.items():
        times = medians(functions, repeats)
        print(f"   n = {n:5d} {name:10s} ours {times['ours']:9.4f} s", end="")
        for other, seconds in times.items():
            if other != "ours":
                print(f" | {other} {seconds:9.4f} s {times['ours'] / seconds:6.2f}x", end="")
        print()
    differences = []
    for name in ("filtering", "smoothing"):
        ours = runs[name]["ours"]()
        differences += [np.abs(ours - np.asarray(f())).max() for f in runs[name].values()]
    path = runs["viterbi"]["ours"]()
    same = [bool(np.array_equal(path, np.asarray(f()))) for f in runs["viterbi"].values()]
    print(
        f"   n = {n:5d} largest difference of a filtered belief or posterior "
        f"{max(differences):.1e}; the same path as each: {all(same)}"
    )


# --- 2. top-p 0.9 on Bell 20,000 --------------------------------------------------------------


def topp() -> None:
    print(
        "\n2. Top-p 0.9 smoothing and Viterbi against the exact dense ones, Bell 20,000, 50 steps"
    )
    exact = build_model("bell", 20000)
    approximation = approximate(exact, "topp", 0.9)
    # Drawn from the approximation, so that every symbol is possible under both models.
    observations = sample(approximation.hmm, 49, seed=0).observations
    times = medians(
        {
            "exact smoothing": lambda: smoothing(exact, observations),
            "top-p smoothing": lambda: smoothing(approximation.hmm, observations),
            "exact viterbi": lambda: viterbi(exact, observations),
            "top-p viterbi": lambda: viterbi(approximation.hmm, observations),
        },
        3,
    )
    for name in ("smoothing", "viterbi"):
        exact_s, top_s = times[f"exact {name}"], times[f"top-p {name}"]
        print(
            f"   {name:10s} exact {exact_s:8.3f} s  top-p {top_s:8.4f} s  {exact_s / top_s:6.1f}x"
        )
    tv = total_variation(
        smoothing(exact, observations).posteriors,
        smoothing(approximation.hmm, observations).posteriors,
    )
    paths = viterbi(exact, observations).path, viterbi(approximation.hmm, observations).path
    print(
        f"   posteriors' TV: max {tv.max():.3g}, mean {tv.mean():.3g}; "
        f"paths differ at {np.mean(paths[0] != paths[1]):.0%} of the steps"
    )


# --- 3. structured Bell 10^6: time and peak memory -------------------------------------------

CHILD = """
import json, math, sys, time
import numpy as np
from pipeline.inference import sample, smoothing, smoothing_chunks, viterbi
from pipeline.models import build_model

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

what, horizon = sys.argv[1], 50
small = build_model("bell", 1000, structured=True)  # compile every recursion first
hmm = build_model("bell", 10**6, structured=True)
observations = sample(hmm, horizon - 1, seed=0).observations
runs = {
    "smoothing": lambda h, o: smoothing(h, o),
    "smoothing_chunks": lambda h, o: [c.start for c in smoothing_chunks(h, o)],
    "viterbi": lambda h, o: viterbi(h, o),
    "viterbi checkpointed": lambda h, o: viterbi(h, o, checkpoint=math.isqrt(horizon - 1) + 1),
}
runs[what](small, observations % 1000)
before = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # restart the peak (VmHWM) from here
start = time.perf_counter()
runs[what](hmm, observations)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak": status("VmHWM") - before, "before": before}))
"""


def structured() -> None:
    print(
        "\n3. Structured Bell 10^6 states, horizon 50, one thread: seconds and the call's peak "
        "resident memory above what the process held before it (model, observations), "
        "median of 3 fresh processes"
    )
    for what in ("smoothing", "smoothing_chunks", "viterbi", "viterbi checkpointed"):
        runs = []
        for _ in range(3):
            child = subprocess.run(
                [sys.executable, "-c", CHILD, what], capture_output=True, text=True, check=True
            )
            runs.append(json.loads(child.stdout.strip().splitlines()[-1]))
        seconds = statistics.median(r["seconds"] for r in runs)
        peak = statistics.median(r["peak"] for r in runs)
        before = statistics.median(r["before"] for r in runs)
        print(
            f"   {what:22s} {seconds:7.2f} s   peak {peak / 2**30:6.3f} GiB above "
            f"{before / 2**30:.2f} GiB"
        )


# --- 4. the batched dense step ------------------------------------------------------------------


@numba.njit
def _transposed_steps(T, history):
    """The block step on a state-major history (n, B) as it was before: each block copied
    member-major, multiplied, and copied back."""
    for t in range(1, history.shape[0]):
        history[t] = np.dot(np.ascontiguousarray(history[t - 1].T), T).T


@numba.njit
def _state_major_steps(T, history):
    """The block step before that: ``T^T @ block`` on state-major blocks (n, B)."""
    for t in range(1, history.shape[0]):
        np.dot(T.T, history[t - 1], history[t])


def batch() -> None:
    print(
        "\n4. A batch of 64 distributions, 1000 states, 50 steps, one thread: seconds (median) "
        "against a numpy loop X = X @ A writing the same history"
    )
    rng = np.random.default_rng(0)
    n, size, steps = 1000, 64, 50
    A = rng.dirichlet(np.ones(n), size=n)
    hmm = HMM(np.full(n, 1 / n), A, np.full((n, 1), 1.0))
    initial = rng.dirichlet(np.ones(n), size=size)

    def numpy_loop():
        history = np.empty((steps, size, n))
        history[0] = current = initial
        for t in range(1, steps):
            current = current @ A
            history[t] = current

    def steps_of(layout_step, members: bool):
        def run():
            history = np.empty((steps, size, n) if members else (steps, n, size))
            history[0] = initial if members else initial.T
            layout_step(history)

        return run

    layout = hmm.transition_layout
    assert forward.members_first(layout)

    def block_steps(history):
        for t in range(1, steps):
            forward.step_block(layout, history[t - 1], history[t])

    times = medians(
        {
            "numpy loop": numpy_loop,
            "predict(initial=B)": lambda: predict(hmm, steps - 1, initial=initial),
            "its block steps alone": steps_of(block_steps, True),
            "transposed steps (before)": steps_of(lambda h: _transposed_steps(A, h), False),
            "state-major steps": steps_of(lambda h: _state_major_steps(A, h), False),
        },
        15,
    )
    base = times["numpy loop"]
    for name, seconds in times.items():
        print(f"   {name:28s} {seconds * 1e3:8.2f} ms  {seconds / base:5.2f}x the numpy loop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "part", nargs="?", default="all", choices=["all", "dense", "topp", "structured", "batch"]
    )
    part = parser.parse_args().part
    print(
        f"{platform.node()}: {cpu()}, {memory()}, {blas()}, numpy {np.__version__}, "
        f"numba {numba.__version__}; pinned to core {CORE}; {load()}"
    )
    for name, run in (
        ("dense", dense),
        ("topp", topp),
        ("structured", structured),
        ("batch", batch),
    ):
        if part in ("all", name):
            run()
    print(f"\n{load()}")


if __name__ == "__main__":
    main()
