"""References by enumerating every state path of a tiny HMM (dense arrays), in log space.

``T`` is one transition matrix (n, n), or one per step (T' - 1, n, n) for transitions that
change with time: ``T[t]`` moves step ``t`` to step ``t + 1``."""

import itertools

import numpy as np
from scipy.special import logsumexp


def symbol_log_likelihoods(E: np.ndarray, observations) -> np.ndarray:
    """``log P(o_t | S_t)`` (T, n) of symbols of ``E``; 0 (no information) where -1."""
    with np.errstate(divide="ignore"):
        logs = np.log(E[:, np.maximum(observations, 0)].T)
    return np.where(np.asarray(observations)[:, None] >= 0, logs, 0.0)


def paths(prior, T, log_likelihoods):
    """Every path of T' steps (k, T') and its ``log P(path, o)`` (k,)."""
    steps, n = log_likelihoods.shape
    with np.errstate(divide="ignore"):
        log_prior, log_T = np.log(prior), np.log(T)
    every = np.array(list(itertools.product(range(n), repeat=steps)))
    weights = log_prior[every[:, 0]] + log_likelihoods[np.arange(steps), every].sum(axis=1)
    if log_T.ndim == 2:
        weights += log_T[every[:, :-1], every[:, 1:]].sum(axis=1)
    else:
        weights += log_T[np.arange(steps - 1), every[:, :-1], every[:, 1:]].sum(axis=1)
    return every, weights


def smoothing(prior, T, log_likelihoods):
    """Posteriors (T', n), log evidence and expected transition counts: summed (n, n) for one
    matrix, each step's ``P(S_t = i, S_{t+1} = j | o)`` (T' - 1, n, n) for one per step."""
    every, weights = paths(prior, T, log_likelihoods)
    steps, n = log_likelihoods.shape
    evidence = logsumexp(weights)
    share = np.exp(weights - evidence)
    posteriors = np.zeros((steps, n))
    for t in range(steps):
        np.add.at(posteriors[t], every[:, t], share)
    counts = np.zeros((steps - 1, n, n))
    for t in range(steps - 1):
        np.add.at(counts[t], (every[:, t], every[:, t + 1]), share)
    return posteriors, evidence, counts.sum(axis=0) if np.ndim(T) == 2 else counts


def filtering(prior, T, log_likelihoods):
    """Filtered beliefs ``P(S_t | o_0..o_t)`` (T', n): each step's posterior given the steps
    up to it."""
    steps = log_likelihoods.shape[0]
    return np.stack(
        [
            smoothing(prior, T if np.ndim(T) == 2 else T[:t], log_likelihoods[: t + 1])[0][t]
            for t in range(steps)
        ]
    )


def viterbi(prior, T, log_likelihoods):
    """The most probable path, ties to the lowest last state, then the lowest state before
    it, and so on back (the smallest path read backwards), and its log probability."""
    every, weights = paths(prior, T, log_likelihoods)
    best = weights.max()
    tied = every[weights >= best - 1e-12 * abs(best)]
    return np.array(min(map(tuple, tied[:, ::-1]))[::-1]), best
