"""The neural transition parameterisation of Chiu and Rush ("Scaling Hidden Markov Language
Models", 2020; harvardnlp/hmm-lm): state embeddings through a small residual MLP,
dot-product logits, a softmax over each row.

Every state i has an embedding ``e_i`` (d,); the MLP is the residual layer of that code
(a linear layer and a ReLU, a second one, their sum normalised by a layer norm):

    a_i = relu(W1 e_i + b1),   r_i = relu(W2 a_i + b2),   h_i = LayerNorm(a_i + r_i),

and ``T_ij = exp(h_i . e_j) / Z_i`` with ``Z_i = sum_j exp(h_i . e_j)`` (the right
embedding tied to the left, as in the paper's runs). The parameters are ``n d + 2 d^2 +
4 d`` numbers: no n x n table. ``Z`` is computed in tiles of ``TILE`` rows (``tile x n``
logits at a time), and a blocked model reads only the k x k blocks its tokens visit
(``dense_blocks``), so an n x n matrix is never held.

With ``G`` the gradient of the log evidence with respect to the matrix (on the visited
blocks) and ``visits_i = sum_j G_ij T_ij``, the gradient with respect to the logits is
``D_ij = T_ij G_ij - visits_i T_ij``; through the dot products

    dh_i = sum_j T_ij G_ij e_j - visits_i E_{T_i}[e],
    de_j += sum_i T_ij G_ij h_i - sum_i visits_i T_ij h_i,

the first terms block by block, the second (every row's expectation) in a second pass over
the tiles (``normaliser_gradient``); then back through the MLP (``mlp_gradient``). A
batch costs O(n^2 d) for the normalisers whatever its tokens, and O(k^2 d) per visited
block.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

TILE = 256
"""Rows of logits computed at once (a tile of ``TILE x n`` numbers)."""
EPSILON = 1e-5
"""The layer norm's variance floor (PyTorch's default)."""


class Neural(NamedTuple):
    """The neural transitions: embeddings (n, d) and the residual MLP's parameters."""

    E: np.ndarray  # (n, d) state embeddings
    W1: np.ndarray  # (d, d)
    b1: np.ndarray  # (d,)
    W2: np.ndarray  # (d, d)
    b2: np.ndarray  # (d,)
    gain: np.ndarray  # (d,) the layer norm's scale
    bias: np.ndarray  # (d,) the layer norm's shift


class Hidden(NamedTuple):
    """The MLP's output ``H`` (n, d) and what its gradient reuses."""

    H: np.ndarray  # (n, d) h_i
    a: np.ndarray  # (n, d) relu(W1 e + b1)
    r: np.ndarray  # (n, d) relu(W2 a + b2)
    normed: np.ndarray  # (n, d) (a + r - mean) / std, before gain and bias
    inverse_std: np.ndarray  # (n, 1)


def hidden(p: Neural) -> Hidden:
    """The MLP on every embedding."""
    a = np.maximum(p.E @ p.W1.T + p.b1, 0)
    r = np.maximum(a @ p.W2.T + p.b2, 0)
    z = a + r
    centred = z - z.mean(axis=1, keepdims=True)
    inverse_std = 1 / np.sqrt((centred**2).mean(axis=1, keepdims=True) + EPSILON)
    normed = centred * inverse_std
    return Hidden(normed * p.gain + p.bias, a, r, normed, inverse_std.astype(p.E.dtype))


def mlp_gradient(p: Neural, h: Hidden, dH: np.ndarray, dE: np.ndarray) -> Neural:
    """The gradient of every parameter from ``dH`` (n, d), the gradient with respect to the
    MLP's outputs, and ``dE`` (n, d), the one with respect to the embeddings as the logits'
    right factor."""
    d = dH.shape[1]
    d_normed = dH * p.gain
    dz = (h.inverse_std / d) * (
        d * d_normed
        - d_normed.sum(axis=1, keepdims=True)
        - h.normed * (d_normed * h.normed).sum(axis=1, keepdims=True)
    )
    dr = dz * (h.r > 0)
    da = (dz + dr @ p.W2) * (h.a > 0)
    return Neural(
        dE + da @ p.W1,
        da.T @ p.E,
        da.sum(axis=0),
        dr.T @ h.a,
        dr.sum(axis=0),
        (dH * h.normed).sum(axis=0),
        dH.sum(axis=0),
    )


def log_normalisers(H: np.ndarray, E: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """``log Z_i = log sum_j exp(h_i e_j)`` (n,) for ``rows`` (default all; the others
    NaN), ``TILE`` rows at a time."""
    rows = np.arange(len(H)) if rows is None else rows
    out = np.full(len(H), np.nan, dtype=H.dtype)
    for lo in range(0, rows.size, TILE):
        chosen = rows[lo : lo + TILE]
        S = H[chosen] @ E.T
        top = S.max(axis=1)
        np.exp(S - top[:, None], out=S)
        out[chosen] = top + np.log(S.sum(axis=1))
    return out


def transition_matrix(p: Neural) -> np.ndarray:
    """The (n, n) row-stochastic matrix (for small models, tests and saved models)."""
    h = hidden(p)
    S = h.H @ p.E.T
    return np.exp(S - log_normalisers(h.H, p.E)[:, None])


def dense_blocks(H, E, log_z, slot: np.ndarray, k: int) -> np.ndarray:
    """The blocks (P, k, k) ``exp(H_a E_b^T - log Z_a)`` of the (a, b) pairs with a slot
    (``slot`` (C, C), numbered in row-major order as ``blocked.visited`` numbers them)."""
    a, b = np.nonzero(slot >= 0)
    C, d = slot.shape[0], H.shape[1]
    left, right = H.reshape(C, k, d)[a], E.reshape(C, k, d)[b]
    values = np.matmul(left, right.transpose(0, 2, 1))
    values -= log_z.reshape(C, k)[a][:, :, None]
    return np.exp(values, out=values)


def block_gradient(H, E, D: np.ndarray, slot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sum_j D_ij e_j`` (n, d) and ``sum_i D_ij h_i`` (n, d) from ``D`` on the blocks
    (P, k, k), zero elsewhere."""
    a, b = np.nonzero(slot >= 0)
    C, k, d = slot.shape[0], D.shape[1], H.shape[1]
    dH, dE = np.zeros((C, k, d), H.dtype), np.zeros((C, k, d), H.dtype)
    np.add.at(dH, a, np.matmul(D, E.reshape(C, k, d)[b]))
    np.add.at(dE, b, np.matmul(D.transpose(0, 2, 1), H.reshape(C, k, d)[a]))
    return dH.reshape(-1, d), dE.reshape(-1, d)


def normaliser_gradient(H, E, log_z, visits) -> tuple[np.ndarray, np.ndarray]:
    """``-visits_i sum_j T_ij e_j`` (n, d) and ``-sum_i visits_i T_ij h_i`` (n, d): the
    normalisers' part of the gradient, over the rows with visits, ``TILE`` at a time."""
    dH, dE = np.zeros_like(H), np.zeros_like(E)
    rows = np.flatnonzero(visits)
    weights = visits.astype(H.dtype)
    for lo in range(0, rows.size, TILE):
        chosen = rows[lo : lo + TILE]
        P = H[chosen] @ E.T
        P -= log_z[chosen][:, None]
        np.exp(P, out=P)
        P *= weights[chosen][:, None]
        dH[chosen] = -(P @ E)
        dE -= P.T @ H[chosen]
    return dH, dE


def gradient(p: Neural, G: np.ndarray) -> Neural:
    """The gradient of the log evidence from ``G`` (n, n) with respect to the matrix (the
    unblocked model's ``before.T @ after``)."""
    h = hidden(p)
    T = transition_matrix(p)
    D = T * (G - np.einsum("ij,ij->i", G, T)[:, None])  # with respect to the logits
    return mlp_gradient(p, h, D @ p.E, D.T @ h.H)


def initial(n_states: int, dim: int, rng: np.random.Generator, dtype) -> Neural:
    """Embeddings of scale 1 / sqrt(d), weights of a PyTorch linear layer's scale, the
    layer norm at identity."""
    scale = 1 / np.sqrt(dim)

    def uniform(*shape):
        return (scale * rng.uniform(-1, 1, shape)).astype(dtype)

    return Neural(
        (scale * rng.standard_normal((n_states, dim))).astype(dtype),
        uniform(dim, dim),
        uniform(dim),
        uniform(dim, dim),
        uniform(dim),
        np.ones(dim, dtype),
        np.zeros(dim, dtype),
    )
