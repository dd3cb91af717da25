"""Emission models ``fit`` learns: the base class (the M-step hook) and the two built-ins.

An ``Emission`` gives the E-step each step's log-likelihoods ``log P(o_t | S_t = i)`` and
re-estimates itself from the posteriors in the M-step; it holds arrays, and its methods hand
them to the functions of this module. ``Categorical`` is a symbol emission matrix learnt by
counts, ``Gaussian`` one normal distribution per state over real numbers learnt by weighted
moments (Rabiner, "A Tutorial on Hidden Markov Models", eq. 40c, and eqs. 53 and 54 with one
mixture component).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pipeline.hmm import validate_rows
from pipeline.learning.entries import entries, reestimate
from pipeline.operators import Matrix, as_operator, columns

VARIANCE_FLOOR = 1e-3
"""The least variance ``Gaussian``'s M-step gives a state (hmmlearn's ``min_covar``): a state
whose posterior weight sits on one value would otherwise collapse onto it, its variance to
zero and the likelihood to infinity. hmmlearn adds ``min_covar`` only when it initialises;
its M-step adds ``covars_prior`` instead."""


class Emission(ABC):
    """An emission model that ``fit`` learns beside the prior and the transitions.

    A subclass holds the model's arrays and implements the two methods the EM loop calls;
    ``read`` may check a sequence's observations (by default taken as they are).
    """

    def read(self, sequence, name: str) -> np.ndarray:
        """One sequence's observations as the model reads them, shape (T, ...); raise
        ``ValueError`` in one line naming ``name`` (``observations[b]``) and what is allowed."""
        return np.asarray(sequence)

    @abstractmethod
    def log_likelihoods(self, observations: np.ndarray) -> np.ndarray:
        """``log P(o_t | S_t = i)``, shape (T, n_states), of one sequence's observations
        (T, ...) as ``read`` returns them; 0 at a step that observed nothing."""

    @abstractmethod
    def m_step(self, observations: np.ndarray, posteriors: np.ndarray) -> Emission:
        """The model re-estimated from the observations (N, ...) of every training step, the
        sequences concatenated, and their posteriors ``P(S_t = i | o)`` (N, n_states)."""


@dataclass(frozen=True, eq=False)
class Categorical(Emission):
    """Symbols ``0..m - 1``, or -1 for a step that observed nothing.

    probabilities : ndarray or csr_array, shape (n_states, m)
        ``probabilities[i, o] = P(O_t = o | S_t = i)``, rows summing to 1; a CSR matrix
        keeps its pattern under the M-step.
    """

    probabilities: Matrix

    def __post_init__(self) -> None:
        probabilities = as_operator(self.probabilities, "probabilities")
        entries(probabilities, "probabilities")  # a format whose entries EM learns
        validate_rows("probabilities", probabilities)
        object.__setattr__(self, "probabilities", probabilities)

    def read(self, sequence, name: str) -> np.ndarray:
        return read_symbols(sequence, self.probabilities.shape[1], name)

    def log_likelihoods(self, observations: np.ndarray) -> np.ndarray:
        return symbol_log_likelihoods(self.probabilities, observations)

    def m_step(self, observations: np.ndarray, posteriors: np.ndarray) -> Categorical:
        learnt = entries(self.probabilities, "probabilities")
        counts = symbol_counts(learnt.rows, learnt.columns, observations, posteriors)
        return Categorical(learnt.build(reestimate(learnt.values, counts, None, learnt.rows)))


@dataclass(frozen=True, eq=False)
class Gaussian(Emission):
    """Real numbers, one normal distribution ``N(means[i], variances[i])`` per state.

    means, variances : ndarray, shape (n_states,)
        Each state's mean and variance (variance > 0).
    variance_floor : float > 0
        The least variance the M-step gives a state (``VARIANCE_FLOOR`` by default).

    Every step is observed (a finite number): there is no missing value.
    """

    means: np.ndarray
    variances: np.ndarray
    variance_floor: float = VARIANCE_FLOOR

    def __post_init__(self) -> None:
        means = np.array(self.means, dtype=np.float64)
        variances = np.array(self.variances, dtype=np.float64)
        if means.ndim != 1 or means.size == 0 or variances.shape != means.shape:
            raise ValueError(
                f"means and variances must be 1-D of one length (n_states,), got shapes "
                f"{means.shape} and {variances.shape}"
            )
        if not (np.isfinite(means).all() and np.isfinite(variances).all() and variances.min() > 0):
            raise ValueError("means must be finite and variances finite and > 0")
        floor = self.variance_floor
        if not (isinstance(floor, int | float | np.floating) and 0 < floor < np.inf):
            raise ValueError(f"variance_floor must be a number > 0, got {floor!r}")
        object.__setattr__(self, "means", means)
        object.__setattr__(self, "variances", variances)

    def read(self, sequence, name: str) -> np.ndarray:
        return read_reals(sequence, name)

    def log_likelihoods(self, observations: np.ndarray) -> np.ndarray:
        return gaussian_log_likelihoods(self.means, self.variances, observations)

    def m_step(self, observations: np.ndarray, posteriors: np.ndarray) -> Gaussian:
        means, variances = gaussian_moments(
            self.means, self.variances, observations, posteriors, self.variance_floor
        )
        return Gaussian(means, variances, self.variance_floor)


def _one_sequence(sequence, name: str) -> np.ndarray:
    sequence = np.asarray(sequence)
    if sequence.ndim != 1 or sequence.size == 0:
        raise ValueError(
            f"{name} has shape {sequence.shape}; allowed: a 1-D sequence of at least one step"
        )
    return sequence


def read_symbols(sequence, n_observations: int, name: str) -> np.ndarray:
    """``sequence`` as int64 symbols (T,) in ``0..n_observations - 1`` or -1 (none)."""
    sequence = _one_sequence(sequence, name)
    if sequence.dtype.kind not in "iu":
        raise ValueError(
            f"{name} has dtype {sequence.dtype}; allowed: integer symbols "
            f"0..{n_observations - 1}, or -1 for none"
        )
    bad = (sequence < -1) | (sequence >= n_observations)
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name}[{t}] = {sequence[t]}; allowed: 0..{n_observations - 1}, or -1 for none"
        )
    return sequence.astype(np.int64)


def read_reals(sequence, name: str) -> np.ndarray:
    """``sequence`` as finite float64 numbers (T,)."""
    sequence = _one_sequence(sequence, name)
    if sequence.dtype.kind not in "iuf":
        raise ValueError(f"{name} has dtype {sequence.dtype}; allowed: real numbers")
    sequence = sequence.astype(np.float64)
    if not np.isfinite(sequence).all():
        t = int(np.flatnonzero(~np.isfinite(sequence))[0])
        raise ValueError(f"{name}[{t}] = {sequence[t]}; allowed: finite numbers at every step")
    return sequence


def symbol_log_likelihoods(probabilities: Matrix, observations: np.ndarray) -> np.ndarray:
    """``log probabilities[i, o_t]`` (T, n_states) of symbols (T,); 0 where ``o_t = -1``."""
    with np.errstate(divide="ignore"):
        logs = np.log(columns(probabilities, np.maximum(observations, 0)).T)
    return np.where(observations[:, None] >= 0, logs, 0.0)


def symbol_counts(
    rows: np.ndarray, columns: np.ndarray, observations: np.ndarray, posteriors: np.ndarray
) -> np.ndarray:
    """The expected emission counts ``sum_t P(S_t = i | o) [o_t = o]`` at the entries
    ``(rows[k], columns[k])`` (k,) of an emission matrix, from symbols (N,) (-1: none) and
    their posteriors (N, n_states)."""
    seen = observations >= 0
    observed, index = np.unique(observations[seen], return_inverse=True)
    if observed.size == 0:
        return np.zeros(rows.size)
    steps = np.flatnonzero(seen)
    one_hot = sp.csr_array(
        (np.ones(steps.size), (index, steps)), shape=(observed.size, observations.size)
    )
    sums = one_hot @ posteriors  # (distinct symbols, n_states)
    where = np.minimum(np.searchsorted(observed, columns), observed.size - 1)
    return np.where(observed[where] == columns, sums[where, rows], 0.0)


def gaussian_log_likelihoods(
    means: np.ndarray, variances: np.ndarray, observations: np.ndarray
) -> np.ndarray:
    """``log N(o_t; means[i], variances[i])``, shape (T, n_states), of reals (T,)."""
    squares = (observations[:, None] - means) ** 2 / variances
    return -0.5 * (squares + np.log(2 * np.pi * variances))


def gaussian_moments(
    means: np.ndarray,
    variances: np.ndarray,
    observations: np.ndarray,
    posteriors: np.ndarray,
    floor: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The M-step of Gaussian emissions: each state's posterior-weighted mean and variance of
    the observations (N,), the variance at least ``floor``; a state of no posterior weight
    keeps its ``means`` and ``variances`` (n_states,)."""
    weights = posteriors.sum(axis=0)
    seen = weights > 0
    total = np.where(seen, weights, 1.0)
    new_means = np.where(seen, posteriors.T @ observations / total, means)
    spread = (posteriors * (observations[:, None] - new_means) ** 2).sum(axis=0) / total
    return new_means, np.where(seen, np.maximum(spread, floor), variances)
