"""Low-rank: the best non-negative rank-r row-stochastic fit of the transitions.

Kernel HMMs (Chiu, Deng, Rush, "Scaling Hidden Markov Language Models") make a
step O(n F) by parameterising the transitions as a rank-F non-negative product.
As an approximation method of ANY model this is the fit ``T ~ W H`` with
``W`` (n, r) and ``H`` (r, n) non-negative and both row-stochastic, which
minimises the generalised KL divergence
``sum_ij T_ij log(T_ij / (WH)_ij) - T_ij + (WH)_ij`` by Lee and Seung's
multiplicative updates. Every stationary point of KL-NMF keeps the row sums
of ``T`` (Ho and Van Dooren 2008), so the fit is a stochastic matrix up to the
last iterate's rounding, which a final renormalisation removes. The fit is
part of the measured build time. It materialises ``T``: at most
``pipeline.operators.lowrank.MAX_DENSE`` entries.

Prior and emissions stay exact. Guarantee: none a priori (rank r does not
bound a row's error); each row's ``eps_i = TV(T_i, Q_i)`` is measured, so the
method-neutral bounds hold with the measured ``max_i eps_i``.
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.hmm import HMM
from pipeline.methods.base import Approximation
from pipeline.operators import LowRank, toarray
from pipeline.operators.lowrank import MAX_DENSE

SETTING = "r"
"""What the setting of this method is: the rank of the fit, an integer >= 1."""


ITERATIONS = 500
"""Most multiplicative updates of a fit."""

TOLERANCE = 1e-5
"""A fit stops when an update lowers the divergence by less than this fraction."""


def check(setting) -> None:
    """Raise ``TypeError`` or ``ValueError`` unless ``setting`` is an integer >= 1."""
    if isinstance(setting, bool) or not isinstance(setting, int | float | np.number):
        raise TypeError(f"the rank r must be an integer >= 1, got {setting!r}")
    if int(setting) != setting or setting < 1:
        raise ValueError(f"the rank r must be an integer >= 1, got {setting!r}")


def _divergence(T: np.ndarray, Q: np.ndarray, mask: np.ndarray | None) -> float:
    """The generalised KL divergence of ``Q`` from ``T`` over the entries ``mask`` keeps."""
    terms = np.where(T > 0, T * np.log(np.where(T > 0, T, 1.0) / Q), 0.0) - T + Q
    return float((terms if mask is None else terms * mask).sum())


def fit(T: np.ndarray, rank: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative ``W`` (n, r) and ``H`` (r, m), ``H`` row-stochastic, with ``W H ~ T``.

    Parameters
    ----------
    T : ndarray, shape (n, m)
        A non-negative matrix (row-stochastic, or zero where ``mask`` is 0).
    rank : int
        The inner dimension r.
    mask : ndarray of 0.0/1.0, shape (n, m), optional
        The entries the fit counts (weighted KL-NMF); default all.

    The updates start from a fixed random draw, so the fit is deterministic.
    """
    n, m = T.shape
    rng = np.random.default_rng(0)
    W = rng.random((n, rank)) + 0.1
    H = rng.random((rank, m)) + 0.1
    H /= H.sum(axis=1, keepdims=True)
    W *= (T.sum(axis=1) / (W @ H).sum(axis=1))[:, None]
    weights = np.ones((n, m)) if mask is None else mask
    previous = np.inf
    for _ in range(ITERATIONS):
        H *= (W.T @ (weights * T / (W @ H))) / (W.T @ weights)
        W *= ((weights * T / (W @ H)) @ H.T) / (weights @ H.T)
        divergence = _divergence(T, W @ H, mask)
        if np.isfinite(previous) and previous - divergence <= TOLERANCE * previous:
            break
        previous = divergence
    scale = H.sum(axis=1)
    return W * scale, H / scale[:, None]


def row_errors(T: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``eps_i = TV(T_i, Q_i)``, shape (n,)."""
    return 0.5 * np.abs(T - Q).sum(axis=1)


def dense_transitions(hmm: HMM) -> np.ndarray:
    """``hmm.transition`` as a dense array; ``ValueError`` above ``MAX_DENSE`` entries."""
    n = hmm.n_states
    if n * n > MAX_DENSE:
        raise ValueError(
            f"a low-rank fit reads the whole {n} x {n} transition matrix; "
            f"allowed: at most {MAX_DENSE:,} entries (n_states <= {math.isqrt(MAX_DENSE)})"
        )
    return np.array(toarray(hmm.transition), dtype=np.float64)


def approximate(hmm: HMM, setting) -> Approximation:
    """The rank-``setting`` fit of the transitions, and its row errors."""
    T = dense_transitions(hmm)
    W, H = fit(T, int(setting))
    left = W / W.sum(axis=1, keepdims=True)
    Q = LowRank(left, H.T)
    return Approximation(HMM(hmm.prior, Q, hmm.emission), 1.0, 0.0, row_errors(T, Q.toarray()))
