"""How many random features a softmax needs: kernel rows against exact softmax rows.

The kernel HMMs of Chiu, Deng and Rush (*Scaling Hidden Markov Language Models*) replace
the transition softmax ``p_ij = exp(u_i . v_j) / sum_j' exp(u_i . v_j')`` by the kernel
``phi(u_i) . phi(v_j)`` of a random feature map with ``E[phi(u) . phi(v)] = exp(u . v)``,
normalised per row. Their Section 6 asks how many features F that needs as the number of
states n grows. Two maps, with W (F, d) standard normal:

- ``positive``: ``phi(x) = exp(W x - |x|^2 / 2) / sqrt(F)``, the map of the kernel HMMs
  (Performer's positive random features); every entry of a row is positive.
- ``fourier``: random Fourier features of the Gaussian kernel (Rahimi and Recht) times
  ``exp(|u|^2 / 2) exp(|v|^2 / 2)``, ``phi(x) = exp(|x|^2 / 2) [cos(W' x), sin(W' x)] /
  sqrt(F / 2)`` with W' (F / 2, d): the trigonometric map the paper compares with; entries
  can be negative.

The embeddings are Gaussian, ``u, v ~ N(0, I_d / (sqrt(d) temperature))``, so the logits
``u . v`` have standard deviation 1 / temperature: a lower temperature separates the rows
(peaked softmax rows) and lengthens the embeddings, which the positive map's variance
``exp(|u + v|^2)`` pays for. A row's error is the total variation
``TV(p_i, q_i) = sum_j |p_ij - q_ij| / 2`` between the exact row and the kernel row
normalised by its sum (signed for ``fourier``: negative entries count as error).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

FEATURE_MAPS = ("positive", "fourier")
"""The feature maps (the ``feature_map`` coordinate)."""


class Embeddings(NamedTuple):
    """Row embeddings of the sampled rows and column embeddings of every state."""

    U: np.ndarray  # (rows, d)
    V: np.ndarray  # (n, d)


def embeddings(
    n_states: int, dim: int, temperature: float, rows: int, rng: np.random.Generator, dtype=float
) -> Embeddings:
    """Gaussian embeddings with logits of standard deviation ``1 / temperature``, for
    ``min(rows, n_states)`` sampled rows and all ``n_states`` columns, in ``dtype``."""
    scale = 1.0 / np.sqrt(np.sqrt(dim) * temperature)
    return Embeddings(
        (scale * rng.standard_normal((min(rows, n_states), dim))).astype(dtype),
        (scale * rng.standard_normal((n_states, dim))).astype(dtype),
    )


def softmax_rows(e: Embeddings) -> np.ndarray:
    """The exact rows ``p_i`` (rows, n) of the sampled row embeddings (float64)."""
    logits = e.U.astype(float) @ e.V.T.astype(float)
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def _log_positive(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``log(phi(X) sqrt(F))`` of the positive map, (m, F)."""
    return X @ W.T - 0.5 * np.sum(X**2, axis=1, keepdims=True)


def _features(X: np.ndarray, W: np.ndarray, feature_map: str, shift: float) -> np.ndarray:
    """``phi(X)`` (m, F) up to one positive factor (``exp(-shift)``); for ``fourier`` the
    cosines then the sines of the F / 2 frequencies W."""
    if feature_map == "positive":
        return np.exp(_log_positive(X, W) - shift)
    angle = X @ W.T
    radius = np.exp(0.5 * np.sum(X**2, axis=1, keepdims=True) - shift)
    return np.concatenate([np.cos(angle), np.sin(angle)], axis=1) * radius


def _first(features: np.ndarray, feature_map: str, start: int, stop: int) -> np.ndarray:
    """Features ``start:stop`` of the map's order (a fourier map's F features are the
    cosines and sines of its first F / 2 frequencies)."""
    if feature_map == "positive":
        return features[:, start:stop]
    half = features.shape[1] // 2
    return np.c_[
        features[:, start // 2 : stop // 2], features[:, half + start // 2 : half + stop // 2]
    ]


def kernel_rows(
    e: Embeddings, feature_map: str, counts: tuple[int, ...], rng: np.random.Generator, block=8192
) -> np.ndarray:
    """The kernel rows (len(counts), rows, n) of the first F of ``max(counts)`` random
    features, for each F of ``counts`` (ascending, even), each row up to a positive factor.
    The sums grow by the features each count adds; columns go in blocks of ``block``."""
    if feature_map not in FEATURE_MAPS:
        raise ValueError(f"unknown feature map {feature_map!r}; allowed: {', '.join(FEATURE_MAPS)}")
    d, top, n, dtype = e.U.shape[1], max(counts), len(e.V), e.U.dtype
    W = rng.standard_normal((top if feature_map == "positive" else top // 2, d)).astype(dtype)
    # One shift for every column: w . v - |v|^2 / 2 <= |w|^2 / 2 (positive); |v|^2 / 2.
    if feature_map == "positive":
        shift = 0.5 * float(np.sum(W**2, axis=1).max())
    else:
        shift = 0.5 * float(np.sum(e.V**2, axis=1).max())
    left = _features(e.U, W, feature_map, 0.0)
    left /= np.abs(left).max(axis=1, keepdims=True)
    out = np.empty((len(counts), len(e.U), n), dtype=dtype)
    for k in range(0, n, block):
        right = _features(e.V[k : k + block], W, feature_map, shift)
        total, done = np.zeros((len(e.U), len(right)), dtype=dtype), 0
        for c, F in enumerate(counts):
            total += _first(left, feature_map, done, F) @ _first(right, feature_map, done, F).T
            out[c, :, k : k + len(right)] = total
            done = F
    return out


class RowErrors(NamedTuple):
    """Per feature count: the median and 90th percentile of the rows' TV, and the fraction
    of kernel entries that are negative."""

    median: np.ndarray  # (len(counts),)
    p90: np.ndarray  # (len(counts),)
    negative: np.ndarray  # (len(counts),)


def row_errors(exact: np.ndarray, kernel: np.ndarray) -> RowErrors:
    """TV between each exact row (rows, n) and each kernel row (counts, rows, n) normalised
    by its sum; a row whose kernel sums to zero or less has TV of at least 1."""
    kernel = kernel.astype(float)
    total = kernel.sum(axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(total > 0, kernel / total, np.nan)
    tv = np.nan_to_num(0.5 * np.abs(q - exact[None]).sum(axis=2), nan=np.inf)
    return RowErrors(
        np.median(tv, axis=1),
        np.quantile(tv, 0.9, axis=1, method="higher"),
        (kernel < 0).mean(axis=(1, 2)),
    )
