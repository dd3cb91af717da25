"""Structured mean field, chain-wise Viterbi and top-p on the joint chain, against exact.

``compare`` runs every method on one observation sequence of one coupled model and
returns what the coupled sweep stores (``pipeline.sweep.coupled_store.VARIABLES``): per-chain
TV of filtered and smoothed marginals against exact, the chain-wise Viterbi path's
Hamming distance and log-probability gap to the exact joint Viterbi path, iterations,
and every method's runtime (median of ``repeats`` runs, at most ``budget`` seconds of
repeats each). Without an exact reference (``exact=False``: too many joint states) the
comparisons are NaN and only what needs no exact run is measured: the sampled path's
probability under each method.
"""

from __future__ import annotations

import time

import numpy as np

from pipeline.coupled import exact as joint
from pipeline.coupled import meanfield
from pipeline.coupled.model import CoupledHMM
from pipeline.coupled.viterbi import chainwise_viterbi
from pipeline.inference import filtering
from pipeline.methods import approximate
from pipeline.metrics import total_variation


def timed(run, repeats: int, budget: float):
    """``run()``'s result and the median seconds of up to ``repeats`` runs (fewer once
    ``budget`` seconds have passed, at least one)."""
    seconds = []
    start = time.perf_counter()
    while not seconds or (len(seconds) < repeats and time.perf_counter() - start < budget):
        begin = time.perf_counter()
        result = run()
        seconds.append(time.perf_counter() - begin)
    return result, float(np.median(seconds))


def chain_tv(reference: list, approximate_: list, reduce=np.max) -> np.ndarray:
    """Per step, the largest (or ``reduce``) over chains of TV between two chains' marginals:
    lists of k arrays (T, n_i) -> shape (T,)."""
    return reduce(
        [total_variation(a, b) for a, b in zip(reference, approximate_, strict=True)], axis=0
    )


def _truth(marginals: list, paths: np.ndarray) -> float:
    """Mean over chains and steps of the probability given to the sampled state."""
    steps = np.arange(paths.shape[0])
    return float(np.mean([m[steps, paths[:, i]] for i, m in enumerate(marginals)]))


def compare(
    model: CoupledHMM,
    paths: np.ndarray,
    observations: np.ndarray,
    *,
    topp: tuple[float, ...],
    exact: bool,
    tolerance: float,
    max_iterations: int,
    repeats: int,
    budget: float,
) -> dict[str, object]:
    """Every method on ``observations`` (T,) of ``model``, whose sampled path is ``paths``
    (T, k): variable name -> value (arrays over ``p`` and ``t`` where the variable has them)."""
    kw = {"tolerance": tolerance, "max_iterations": max_iterations}
    filtered, t_filter = timed(
        lambda: meanfield.filtering(model, observations, **kw), repeats, budget
    )
    smoothed, t_smooth = timed(
        lambda: meanfield.smoothing(model, observations, **kw), repeats, budget
    )
    hard, t_viterbi = timed(
        lambda: chainwise_viterbi(model, observations, max_iterations=max_iterations),
        repeats,
        budget,
    )
    values = {
        "iterations": smoothed.iterations,
        "converged": float(smoothed.converged),
        "viterbi_iterations": hard.iterations,
        "viterbi_converged": float(hard.converged),
        "runtime_mean_field": t_smooth,
        "runtime_mean_field_filter": t_filter,
        "runtime_viterbi": t_viterbi,
        "log_joint_truth": model.log_joint(paths, observations),
        "log_joint_viterbi": hard.log_joint,
        "truth_mean_field": _truth(smoothed.marginals, paths),
        "n_joint": model.n_joint,
    }
    if not exact:  # the store keeps NaN for everything measured against exact
        return values
    operator = joint.JointTransition(model)
    reference, t_exact = timed(
        lambda: joint.smoothing(model, observations, operator), repeats, budget
    )
    (best, _), t_exact_viterbi = timed(
        lambda: joint.viterbi(model, observations, operator), repeats, budget
    )
    exact_filtered = joint.marginals(reference.filtered, model.sizes)
    exact_smoothed = joint.marginals(reference.smoothed, model.sizes)
    hmm = model.joint()
    _, t_joint = timed(lambda: filtering(hmm, observations), repeats, budget)
    tv_topp, t_topp, kept = [], [], []
    for p in topp:
        approximation = approximate(hmm, "topp", p)
        run, seconds = timed(
            lambda a=approximation: filtering(a.hmm, observations), repeats, budget
        )
        tv_topp.append(chain_tv(exact_filtered, joint.marginals(run.beliefs, model.sizes)))
        t_topp.append(seconds)
        kept.append(approximation.hmm.transition.nnz / model.n_joint**2)
    log_joint_exact = model.log_joint(best, observations)
    return values | {
        "tv_mean_field": chain_tv(exact_filtered, filtered.marginals),
        "tv_mean_field_smoothed": chain_tv(exact_smoothed, smoothed.marginals),
        "tv_mean_field_chain_mean": chain_tv(exact_filtered, filtered.marginals, np.mean),
        "tv_mean_field_smoothed_chain_mean": chain_tv(exact_smoothed, smoothed.marginals, np.mean),
        "tv_topp": np.array(tv_topp),
        "runtime_topp": np.array(t_topp),
        "topp_density": np.array(kept),
        "runtime_exact": t_exact,
        "runtime_exact_viterbi": t_exact_viterbi,
        "runtime_exact_joint": t_joint,
        "viterbi_hamming": float(np.mean(best != hard.paths)),
        # both paths' log probabilities summed alike, so equal paths have a gap of exactly 0
        "viterbi_logprob_gap": log_joint_exact - hard.log_joint,
        "log_joint_exact": log_joint_exact,
        "log_evidence": reference.log_evidence,
        "truth_exact": _truth(exact_smoothed, paths),
    }
