"""Chain-wise Viterbi (Thon and Kersting, equations (a) to (d)): one chain's path at a time.

Start from each chain's own Viterbi path with the other chains ignored (replaced by
uniform marginals, ``pipeline.coupled.meanfield``). Then, in turn, re-run each chain's
Viterbi with the other chains fixed at their paths; the score of chain i's state
``x_{i,t}`` at step t is

(a) the best score of a predecessor ``x_{i,t-1}``, times
(b) ``P(x_{i,t} | x_{i,t-1}, xbar_{-i,t-1})``, chain i's move from the joint state, times
(c) ``P(o_t | x_{i,t}, xbar_{-i,t})``, the observation, times
(d) ``prod_{j != i} P(xbar_{j,t+1} | x_{i,t}, xbar_{-i,t})``, the other chains' next moves,

which is the joint probability ``P(x, o)`` as a function of chain i's path alone: each
update maximises it exactly over that path, so the joint log probability never
decreases and the cycles stop when no path changes. The seed writes every other chain at
its previous cycle's path (a Jacobi sweep); here each update sees the latest paths (a
Gauss-Seidel sweep), which is what makes the ascent monotone. A cycle costs about
``k^2 n^2`` per step: each of the k chains reads n^2 entries of its own moves for (b) and,
for (d), the next-state rows of the k - 1 other chains for each of its n states.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.coupled import meanfield
from pipeline.coupled.model import CoupledHMM
from pipeline.hmm import HMM
from pipeline.inference import viterbi

MAX_ITERATIONS = 100
"""Stop after this many cycles over the chains, converged or not."""


class ChainwiseResult(NamedTuple):
    """paths (T, k): each chain's path; log_joint: ``log P(paths, o)``; iterations: cycles
    over the chains, the last one changing nothing if ``converged``."""

    paths: np.ndarray
    log_joint: float
    iterations: int
    converged: bool


def _viterbi(prior, transitions, log_scores) -> np.ndarray:
    """The best path of one chain by ``pipeline.inference.viterbi``: prior (n,), transitions
    (T - 1, n, n) (a time-varying transition, rows summing to 1), log_scores (T, n)
    (everything else each state earns, as the log likelihoods of an emission model)."""
    n = len(prior)
    chain = HMM(prior, np.eye(n), np.ones((n, 1)))
    return viterbi(chain, log_likelihoods=log_scores, transitions=transitions).path


def _alone(model: CoupledHMM, i: int, observations) -> np.ndarray:
    """Chain i's Viterbi path with the other chains ignored (uniform marginals)."""
    uniform = [np.full(n, 1 / n) for n in model.sizes]
    t = meanfield.transition(model, i, uniform)
    with np.errstate(divide="ignore"):
        scores = np.log(
            np.stack([meanfield.likelihood(model, i, int(o), uniform) for o in observations])
        )
    return _viterbi(model.priors[i], np.broadcast_to(t, (len(observations) - 1, *t.shape)), scores)


def _update(model: CoupledHMM, i: int, paths: np.ndarray, observations) -> np.ndarray:
    """Chain i's best path with the other chains fixed at ``paths`` (T, k)."""
    steps, n = paths.shape[0], model.sizes[i]
    # Joint states with chain i free: varied[t, x] = paths[t] with chain i at x.
    varied = np.repeat(paths[:, None, :], n, axis=1)
    varied[:, :, i] = np.arange(n)
    flat = varied.reshape(-1, model.chains)
    with np.errstate(divide="ignore"):
        moved = model.conditional(i, flat[: (steps - 1) * n]).reshape(steps - 1, n, n)
        scores = np.zeros((steps, n))
        for t, o in enumerate(observations):  # (c)
            if o >= 0:
                scores[t] += np.log(model.likelihood(int(o), varied[t]))
        for j in range(model.chains):  # (d)
            if j != i and steps > 1:
                moves = model.conditional(j, flat[: (steps - 1) * n]).reshape(steps - 1, n, -1)
                nxt = paths[1:, j]
                scores[:-1] += np.log(moves[np.arange(steps - 1), :, nxt])
    return _viterbi(model.priors[i], moved, scores)


def chainwise_viterbi(
    model: CoupledHMM, observations, *, max_iterations: int = MAX_ITERATIONS
) -> ChainwiseResult:
    """Chain-wise Viterbi from each chain's own path (``ChainwiseResult``).

    ``observations``: joint symbols (T,), -1 where nothing is observed.
    """
    observations = np.asarray(observations, dtype=np.int64)
    paths = np.stack([_alone(model, i, observations) for i in range(model.chains)], axis=1)
    for cycle in range(1, max_iterations + 1):
        changed = False
        for i in range(model.chains):
            new = _update(model, i, paths, observations)
            changed |= bool((new != paths[:, i]).any())
            paths[:, i] = new
        if not changed:
            return ChainwiseResult(paths, model.log_joint(paths, observations), cycle, True)
    return ChainwiseResult(paths, model.log_joint(paths, observations), max_iterations, False)
