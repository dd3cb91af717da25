"""The evidence of token sequences under an HMM LM and the statistics of its gradient.

A batch of B sequences of T tokens runs the scaled forward-backward recursion
with batched products, so a step costs what the transition format costs: O(n^2)
for a dense matrix, O(n F) for a ``LowRank`` one (and O(n delta) more for its
band). The gradient of ``log P(tokens)`` with respect to the transition matrix
is ``G = sum_t alpha_{t-1}^T g_t`` (``alpha_{t-1}`` the filtered beliefs, ``g_t``
the emission-weighted backward messages over the scale); it is returned as its
two factors, never as an n x n matrix, so each parameterisation contracts it in
its own cost (``pipeline.hmmlm.parameters``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from pipeline.operators import LowRank


class Statistics(NamedTuple):
    """What the gradient of one batch's log evidence needs.

    log_evidence : float, ``sum over sequences of log P(tokens)``.
    posterior_start : (n,), ``sum_b P(S_0 | tokens_b)``.
    emission_counts : (n, V), ``sum_{b,t} P(S_t = i | tokens_b) [o_t = v]``.
    before : (N, n), the filtered beliefs ``alpha_{t-1}`` of every transition (N = B (T - 1)).
    after : (N, n), ``g_t = b_t * beta_t / c_t`` of the same transitions, so that the
        gradient with respect to the transition matrix is ``before.T @ after``.
    """

    log_evidence: float
    posterior_start: np.ndarray
    emission_counts: np.ndarray
    before: np.ndarray
    after: np.ndarray


def forward_product(T, X: np.ndarray) -> np.ndarray:
    """``X @ T`` for a batch of row vectors ``X`` (B, n) and a dense or ``LowRank`` ``T``."""
    if isinstance(T, LowRank):
        out = (X @ T.left) @ T.right.T
        return out + _band_correction(T).T.dot(X.T).T
    return X @ T


def backward_product(T, Y: np.ndarray) -> np.ndarray:
    """``Y @ T.T`` (each row ``T @ y``) for a batch ``Y`` (B, n)."""
    if isinstance(T, LowRank):
        out = (Y @ T.right) @ T.left.T
        return out + _band_correction(T).dot(Y.T).T
    return Y @ T.T


def _band_correction(T: LowRank) -> sp.csr_array:
    """The band's entries minus the product there: ``T = left @ right.T + correction``."""
    band = T.band
    return sp.csr_array((band.data - T.product_at_band(), band.indices, band.indptr), band.shape)


def statistics(prior: np.ndarray, T, emission: np.ndarray, tokens: np.ndarray) -> Statistics:
    """The scaled forward-backward recursion over a batch of token sequences.

    Parameters
    ----------
    prior : (n,) ``P(S_0)``.
    T : (n, n) dense or ``LowRank``, row-stochastic.
    emission : (n, V) ``P(token | state)``, dense.
    tokens : (B, T) int in ``0..V - 1``.
    """
    B, steps = tokens.shape
    n = prior.size
    likelihood = emission.T[tokens]  # (B, T, n)
    alpha = np.empty((B, steps, n))
    scale = np.empty((B, steps))
    current = prior[None, :] * likelihood[:, 0]
    for t in range(steps):
        if t:
            current = forward_product(T, alpha[:, t - 1]) * likelihood[:, t]
        scale[:, t] = current.sum(axis=1)
        alpha[:, t] = current / scale[:, t, None]
    beta = np.empty((B, steps, n))
    beta[:, -1] = 1.0
    after = np.empty((B, steps - 1, n))
    for t in range(steps - 1, 0, -1):
        after[:, t - 1] = likelihood[:, t] * beta[:, t] / scale[:, t, None]
        beta[:, t - 1] = backward_product(T, after[:, t - 1])
    posterior = alpha * beta
    counts = np.zeros((n, emission.shape[1]))
    np.add.at(counts.T, tokens.ravel(), posterior.reshape(-1, n))
    return Statistics(
        float(np.log(scale).sum()),
        posterior[:, 0].sum(axis=0),
        counts,
        alpha[:, :-1].reshape(-1, n),
        after.reshape(-1, n),
    )
