"""What the coupled sweep's workers run: a cell's model, its sampled path, every method on it.

``coupled_cell`` builds a cell's model (the seeded ``coupled`` family, or a relational spec
grounded at a domain), samples a path and runs every method on its observations
(``compare``): structured mean field, chain-wise Viterbi, and, where the joint chain has at
most ``exact_max_states`` states, exact inference and top-p on the joint chain. It returns
what ``pipeline.kinds.coupled.results`` lists: per-chain TV of filtered and smoothed marginals
against exact, the chain-wise Viterbi path's Hamming distance and log-probability gap to the
exact joint Viterbi path, iterations, and every method's runtime, the methods timed in
rounds (``pipeline.sweep.timing``). Without an exact reference the comparisons are NaN and
only what needs no exact run is measured: the sampled path's probability under each method.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from pipeline.coupled import exact as joint
from pipeline.coupled import family, meanfield
from pipeline.coupled.model import CoupledHMM
from pipeline.coupled.viterbi import chainwise_viterbi
from pipeline.inference import filtering
from pipeline.kinds.coupled.grid import FAMILY, CoupledCell, Settings
from pipeline.kinds.coupled.results import CoupledRecord
from pipeline.kinds.coupled.specs import grounded
from pipeline.methods import approximate
from pipeline.metrics import total_variation
from pipeline.sweep.timing import Timing, clocked

SAMPLING_STREAM = 0xC0DE
"""Mixed into the seed of the sampled path, apart from the model's own draws."""


def build(domains: dict, cell: CoupledCell, settings: Settings) -> CoupledHMM:
    """The model of ``cell``; ``domains`` maps a relational model's
    ``(model, chains, n_states)`` to its domain."""
    if cell.model == FAMILY:
        return family.build(
            cell.chains,
            cell.n_states,
            cell.seed,
            eps=cell.eps,
            n_observations=settings.n_observations,
            observe=cell.observe,
            alpha=settings.alpha,
        )
    return grounded(cell.model, domains[(cell.model, cell.chains, cell.n_states)], cell.eps).model


def coupled_cell(cell: CoupledCell, domains: dict, settings: Settings) -> CoupledRecord:
    """Sample a path of the cell's model and compare every method on it."""
    model = build(domains, cell, settings)
    rng = np.random.default_rng([cell.seed, SAMPLING_STREAM])
    paths, observations = model.sample(settings.horizon + 1, rng)
    observations[np.arange(observations.size) % settings.observe_every != 0] = -1
    return compare(
        model,
        paths,
        observations,
        topp=settings.topp,
        exact=model.n_joint <= settings.exact_max_states,
        tolerance=settings.tolerance,
        max_iterations=settings.max_iterations,
        timing=settings.timing,
    )


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
    timing: Timing,
) -> CoupledRecord:
    """Every method on ``observations`` (T,) of ``model``, whose sampled path is ``paths``
    (T, k), timed in rounds by ``timing``: the cell's record (arrays over ``p`` and ``t``
    where the variable has them; a runtime is the median over rounds)."""
    kw = {"tolerance": tolerance, "max_iterations": max_iterations}
    # each method's run: results of different types, each read by its name below
    runs: dict[str | tuple[str, int], Callable[[], Any]] = {
        "mean_field_filter": lambda: meanfield.filtering(model, observations, **kw),
        "mean_field": lambda: meanfield.smoothing(model, observations, **kw),
        "viterbi": lambda: chainwise_viterbi(model, observations, max_iterations=max_iterations),
    }
    if exact:
        operator = joint.JointTransition(model)
        hmm = model.joint()
        approximations = [approximate(hmm, "topp", p) for p in topp]
        runs |= {
            "exact": lambda: joint.smoothing(model, observations, operator),
            "exact_viterbi": lambda: joint.viterbi(model, observations, operator),
            "exact_joint": lambda: filtering(hmm, observations),
        }
        runs |= {
            ("topp", k): functools.partial(filtering, a.hmm, observations)
            for k, a in enumerate(approximations)
        }
    rounds = timing.rounds({name: clocked(run) for name, run in runs.items()})
    first = {name: found[0][0] for name, found in rounds.items()}
    seconds = {name: float(np.median([s for _, s in found])) for name, found in rounds.items()}
    smoothed, hard = first["mean_field"], first["viterbi"]
    values: dict[str, Any] = {  # what needs no exact run
        "iterations": smoothed.iterations,
        "converged": float(smoothed.converged),
        "viterbi_iterations": hard.iterations,
        "viterbi_converged": float(hard.converged),
        "runtime_mean_field": seconds["mean_field"],
        "runtime_mean_field_filter": seconds["mean_field_filter"],
        "runtime_viterbi": seconds["viterbi"],
        "log_joint_truth": model.log_joint(paths, observations),
        "log_joint_viterbi": hard.log_joint,
        "truth_mean_field": _truth(smoothed.marginals, paths),
        "n_joint": model.n_joint,
    }
    if not exact:  # NaN for everything measured against exact
        return CoupledRecord(**values)
    filtered, reference = first["mean_field_filter"], first["exact"]
    best, _ = first["exact_viterbi"]
    exact_filtered = joint.marginals(reference.filtered, model.sizes)
    exact_smoothed = joint.marginals(reference.smoothed, model.sizes)
    tv_topp = [
        chain_tv(exact_filtered, joint.marginals(first["topp", k].beliefs, model.sizes))
        for k in range(len(topp))
    ]
    log_joint_exact = model.log_joint(best, observations)
    return CoupledRecord(
        **values,
        tv_mean_field=chain_tv(exact_filtered, filtered.marginals),
        tv_mean_field_smoothed=chain_tv(exact_smoothed, smoothed.marginals),
        tv_mean_field_chain_mean=chain_tv(exact_filtered, filtered.marginals, np.mean),
        tv_mean_field_smoothed_chain_mean=chain_tv(exact_smoothed, smoothed.marginals, np.mean),
        tv_topp=np.array(tv_topp),
        runtime_topp=np.array([seconds["topp", k] for k in range(len(topp))]),
        topp_density=np.array([a.hmm.transition.nnz / model.n_joint**2 for a in approximations]),
        runtime_exact=seconds["exact"],
        runtime_exact_viterbi=seconds["exact_viterbi"],
        runtime_exact_joint=seconds["exact_joint"],
        viterbi_hamming=float(np.mean(best != hard.paths)),
        # both paths' log probabilities summed alike, so equal paths have a gap of exactly 0
        viterbi_logprob_gap=log_joint_exact - hard.log_joint,
        log_joint_exact=log_joint_exact,
        log_evidence=reference.log_evidence,
        truth_exact=_truth(exact_smoothed, paths),
    )
