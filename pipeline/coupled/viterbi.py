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

Why each chain's update keeps its own max-product (``_viterbi``, in logs) rather than
``pipeline.inference.viterbi`` over time-varying transitions: the two pick the same path
except between paths equally probable to the last bits, and there the cycles of the ascent
go on from another path. Written over ``pipeline.inference`` (scaled probabilities), a run
of ``experiment=coupled`` stored another chain-wise optimum in 20 of 214 cells (most of the
string quartet, whose rules make many ties; ``log_joint_viterbi`` higher in some, lower in
others, by up to 0.45) and the committed store's values would not hold.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.coupled import meanfield
from pipeline.coupled.model import CoupledHMM
from pipeline.kernels import maxproduct

MAX_ITERATIONS = 100
"""Stop after this many cycles over the chains, converged or not."""


class ChainwiseResult(NamedTuple):
    """paths (T, k): each chain's path; log_joint: ``log P(paths, o)``; iterations: cycles
    over the chains, the last one changing nothing if ``converged``."""

    paths: np.ndarray
    log_joint: float
    iterations: int
    converged: bool


def _viterbi(log_prior, log_transitions, log_scores) -> np.ndarray:
    """The best path of one chain: log_prior (n,), log_transitions (T - 1, n, n) (a
    time-varying transition), log_scores (T, n) (everything else each state earns)."""
    steps, n = log_scores.shape
    delta = log_prior + log_scores[0]
    back = np.zeros((steps, n), dtype=np.int64)
    for t in range(1, steps):
        scores = delta[:, None] + log_transitions[t - 1]
        back[t] = scores.argmax(axis=0)
        delta = scores[back[t], np.arange(n)] + log_scores[t]
    path = np.empty(steps, dtype=np.int64)
    maxproduct.backtrack(back, int(delta.argmax()), path)
    return path


def _alone(model: CoupledHMM, i: int, observations) -> np.ndarray:
    """Chain i's Viterbi path with the other chains ignored (uniform marginals)."""
    uniform = [np.full(n, 1 / n) for n in model.sizes]
    with np.errstate(divide="ignore"):
        log_t = np.log(meanfield.transition(model, i, uniform))
        scores = np.log(
            np.stack([meanfield.likelihood(model, i, int(o), uniform) for o in observations])
        )
        return _viterbi(
            np.log(model.priors[i]),
            np.broadcast_to(log_t, (len(observations) - 1, *log_t.shape)),
            scores,
        )


def _update(model: CoupledHMM, i: int, paths: np.ndarray, observations) -> np.ndarray:
    """Chain i's best path with the other chains fixed at ``paths`` (T, k)."""
    steps, n = paths.shape[0], model.sizes[i]
    # Joint states with chain i free: varied[t, x] = paths[t] with chain i at x.
    varied = np.repeat(paths[:, None, :], n, axis=1)
    varied[:, :, i] = np.arange(n)
    flat = varied.reshape(-1, model.chains)
    with np.errstate(divide="ignore"):
        log_t = np.log(model.conditional(i, flat[: (steps - 1) * n])).reshape(steps - 1, n, n)
        scores = np.zeros((steps, n))
        for t, o in enumerate(observations):  # (c)
            if o >= 0:
                scores[t] += np.log(model.likelihood(int(o), varied[t]))
        for j in range(model.chains):  # (d)
            if j != i and steps > 1:
                moves = model.conditional(j, flat[: (steps - 1) * n]).reshape(steps - 1, n, -1)
                nxt = paths[1:, j]
                scores[:-1] += np.log(moves[np.arange(steps - 1), :, nxt])
        return _viterbi(np.log(model.priors[i]), log_t, scores)


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
