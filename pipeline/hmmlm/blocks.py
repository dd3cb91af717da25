"""Blocked HMM LMs: parameters, their transitions' blocks, the gradient, state dropout.

A blocked model (``pipeline.hmmlm.clusters.Blocks``: C clusters of k states) has the
``Parameters`` of ``pipeline.hmmlm.parameters`` with one change: its emission logits are
flat (k V,), cluster c's (k, m_c) block (its states over its words) at ``k * starts[c]``,
a softmax over each row, so a state emits only its cluster's words. The transitions are a
``Softmax`` (dense blocks) or a ``Kernel`` (low-rank blocks; its band, if any, becomes the
sparse correction of ``pipeline.hmmlm.blocked``).

State dropout (the regulariser of Chiu and Rush 2020) trains each batch on a sub-model:
``Restriction`` keeps ``k'`` of every cluster's k states, and the sub-model is the model
restricted to them (the softmax over the kept states only, the kernel's normaliser over
the kept columns), itself a blocked model of C clusters of k' states. Its gradient is
scattered back (zero for the dropped states' parameters).

``gradient`` contracts the statistics of ``pipeline.hmmlm.blocked``: for the softmax
``d logits = T * (G - h)`` (n^2), for a kernel the per-transition vectors are summed by
cluster as k x F products, ``dL_a = sum alpha_{t-1}^T q_t`` and ``dR_b = sum g_t^T y_t``,
then through the normaliser and the feature map as in the unblocked kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

from pipeline.hmmlm import blocked
from pipeline.hmmlm.clusters import Blocks
from pipeline.hmmlm.parameters import (
    Kernel,
    Parameters,
    Softmax,
    half_square,
    softmax_in_place,
    softmax_rows,
)
from pipeline.hmmlm.workspace import Workspace, scratch
from pipeline.operators.csr import entry_rows


class Restriction(NamedTuple):
    """A sub-model of a blocked model: the states kept and where its parameters come from.

    states : (n',) the kept states, sorted (``k'`` per cluster).
    emission : (k' V,) the index of each sub-model emission logit in the model's.
    band : (nnz,) the index of each band entry in the model's band logits (n, width),
        in the CSR order of ``indptr`` and ``indices`` (n' + 1,), (nnz,): the band's
        pattern over the kept states (``|i - j| < delta`` in the model's numbering).
    blocks : the sub-model's blocks (the same words, ``k'`` states each).
    """

    states: np.ndarray
    emission: np.ndarray
    band: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    blocks: Blocks


def restriction(blocks: Blocks, kept: np.ndarray, width: int) -> Restriction:
    """The sub-model keeping the states ``kept`` (C, k') of each cluster (indices within
    the cluster, sorted), for a band of ``width = 2 delta - 1`` logits per row (0: none)."""
    C, k = blocks.n_clusters, blocks.states
    kept = np.asarray(kept, dtype=np.int64)
    states = (np.arange(C)[:, None] * k + kept).ravel()
    sizes = np.diff(blocks.starts)
    emission = np.concatenate(
        [
            (k * blocks.starts[c] + kept[c][:, None] * sizes[c] + np.arange(sizes[c])).ravel()
            for c in range(C)
        ]
    )
    n, delta = blocks.n_states, (width + 1) // 2
    inverse = np.full(n, -1)
    inverse[states] = np.arange(states.size)
    offsets = np.arange(-delta + 1, delta) if width else np.zeros(0, np.int64)
    column = states[:, None] + offsets[None, :]
    valid = (column >= 0) & (column < n)
    valid[valid] = inverse[column[valid]] >= 0
    band = (states[:, None] * width + np.arange(width)[None, :])[valid]
    indptr = np.concatenate([[0], np.cumsum(valid.sum(axis=1))])
    return Restriction(
        states,
        emission,
        band,
        indptr,
        inverse[column[valid]],
        blocks._replace(states=kept.shape[1]),
    )


def kept_states(blocks: Blocks, state_dropout: float, rng: np.random.Generator) -> np.ndarray:
    """A random ``1 - state_dropout`` of every cluster's states (at least one), (C, k')."""
    k = blocks.states
    keep = min(k, max(1, k - round(k * state_dropout)))
    chosen = rng.permuted(np.tile(np.arange(k), (blocks.n_clusters, 1)), axis=1)[:, :keep]
    return np.sort(chosen, axis=1)


def full(blocks: Blocks, width: int) -> Restriction:
    """The restriction that keeps every state (no dropout)."""
    return restriction(blocks, np.tile(np.arange(blocks.states), (blocks.n_clusters, 1)), width)


@numba.njit(cache=True, nogil=True)
def _gather(X, keep, out):
    """``out = X[keep][:, keep]``."""
    for i in range(keep.size):
        for j in range(keep.size):
            out[i, j] = X[keep[i], keep[j]]
    return out


def restrict(p: Parameters, r: Restriction, work: Workspace | None = None) -> Parameters:
    """The sub-model's parameters, copies (the band as its entries' logits, (nnz,))."""
    t, keep = p.transition, r.states
    if isinstance(t, Softmax):
        out = scratch(work, "logits", (keep.size, keep.size), t.logits.dtype)
        if keep.size == len(t.logits):
            np.copyto(out, t.logits)
        else:
            _gather(t.logits, keep, out)
        transition = Softmax(out)
    else:
        transition = Kernel(t.U[keep], t.V[keep], t.W, t.band.ravel()[r.band])
    return Parameters(p.prior[keep], p.emission[r.emission], transition)


@numba.njit(cache=True, nogil=True)
def _scatter(X, keep, out):
    """``out[keep][:, keep] = X``, zero elsewhere."""
    out[:] = 0
    for i in range(keep.size):
        for j in range(keep.size):
            out[keep[i], keep[j]] = X[i, j]
    return out


def expand(grad: Parameters, r: Restriction, like: Parameters, work=None) -> Parameters:
    """A sub-model's gradient as the full model's (zero for what the sub-model lacks)."""
    t, keep = grad.transition, r.states
    prior, emission = np.zeros_like(like.prior), np.zeros_like(like.emission)
    prior[keep], emission[r.emission] = grad.prior, grad.emission
    if isinstance(t, Softmax):
        if keep.size == len(like.transition.logits):
            return Parameters(prior, emission, t)
        out = scratch(work, "d_logits", like.transition.logits.shape, t.logits.dtype)
        return Parameters(prior, emission, Softmax(_scatter(t.logits, keep, out)))
    U, V, band = (
        np.zeros_like(x) for x in (like.transition.U, like.transition.V, like.transition.band)
    )
    U[keep], V[keep] = t.U, t.V
    band.ravel()[r.band] = t.band
    return Parameters(prior, emission, Kernel(U, V, t.W, band))


def emission_probabilities(logits: np.ndarray, blocks: Blocks) -> np.ndarray:
    """The flat emission probabilities: a softmax over each state's row of its block."""
    out = np.empty_like(logits)
    k = blocks.states
    for c in range(blocks.n_clusters):
        lo, hi = k * blocks.starts[c], k * blocks.starts[c + 1]
        out[lo:hi] = softmax_rows(logits[lo:hi].reshape(k, -1)).ravel()
    return out


def emission_matrix(probabilities: np.ndarray, blocks: Blocks) -> sp.csr_array:
    """The flat emissions as the (n, V) matrix, each row zero outside its cluster's words."""
    k, sizes = blocks.states, np.diff(blocks.starts)
    rows = np.repeat(np.arange(blocks.n_states), np.repeat(sizes, k))
    columns = np.concatenate(
        [
            np.tile(blocks.order[blocks.starts[c] : blocks.starts[c + 1]], k)
            for c in range(len(sizes))
        ]
    )
    matrix = sp.csr_array((probabilities, (rows, columns)), shape=(blocks.n_states, blocks.n_words))
    matrix.sort_indices()
    return matrix


class KernelBlocks(NamedTuple):
    """A kernel's low-rank blocks and what its gradient reuses."""

    T: blocked.LowRankBlocks  # L = diag(1/z) phi(U), R = phi(V), over scales (_exp_balanced)
    z: np.ndarray  # (n,) row normalisers at those shifts
    band: np.ndarray  # (nnz,) T at the band's entries


def kernel_blocks(t: Kernel, r: Restriction, work: Workspace | None = None) -> KernelBlocks:
    """``T = L R^T + S`` of a sub-model's kernel (``t.band`` its entries' logits)."""
    shape = (len(t.U), len(t.W))
    L = np.matmul(t.U, t.W.T, out=scratch(work, "L", shape, t.U.dtype))
    R = np.matmul(t.V, t.W.T, out=scratch(work, "R", shape, t.V.dtype))
    shift = _exp_balanced(L, R, half_square(t.U), half_square(t.V)).astype(L.dtype)
    z = L @ R.sum(axis=0)
    rows = entry_rows(r.indptr)
    raw = np.exp(t.band - shift[rows])
    product = np.einsum("kf,kf->k", L[rows], R[r.indices])
    if rows.size:
        z += np.bincount(rows, weights=raw - product, minlength=len(L)).astype(z.dtype)
    L /= z[:, None]
    T = blocked.LowRankBlocks(L, R, r.indptr, r.indices, (raw - product) / z[rows])
    return KernelBlocks(T, z, raw / z[rows])


@numba.njit(cache=True, nogil=True, fastmath=True)
def _exp_balanced(L, R, half_u, half_v):
    """The kernel's features from their logits, in place, at scales that keep float32 in range.

    ``R[j, f] = exp(b_jf - m_f)`` with ``b_jf = R[j, f] - half_v[j]`` (log phi(v_j)_f) and
    ``m_f`` the largest ``b_jf`` of feature f, so every column of ``R`` peaks at 1 (its sum
    is at least 1); ``L[i, f] = exp(a_if + m_f - s_i)`` with ``a_if = L[i, f] - half_u[i]``
    and ``s_i`` the row's largest ``a_if + m_f``, so every row of ``L`` peaks at 1. Then
    ``L R^T = diag(exp(-s)) phi(U) phi(V)^T``: the kernel over one scale per row, which the
    row normalisers ``z_i >= 1`` cancel. (With one overall scale for ``R``, ``1 / z`` grows
    past float32's range as training spreads the features' scales.) Returns ``s`` (m,).
    """
    n, F = R.shape
    top = np.full(F, -np.inf)
    for j in range(n):
        for f in range(F):
            top[f] = max(top[f], R[j, f] - half_v[j])
    for j in range(n):
        for f in range(F):
            R[j, f] = np.exp(R[j, f] - half_v[j] - top[f])
    shift = np.empty(L.shape[0])
    for i in range(L.shape[0]):
        high = -np.inf
        for f in range(F):
            high = max(high, L[i, f] - half_u[i] + top[f])
        for f in range(F):
            L[i, f] = np.exp(L[i, f] - half_u[i] + top[f] - high)
        shift[i] = high
    return shift


@numba.njit(cache=True, nogil=True, fastmath=True)
def _contract(D, M, a, c):
    """``D[i, f] = (D[i, f] - a[i] c[f]) M[i, f]`` in place; returns the row sums of D (n,)."""
    n, F = D.shape
    sums = np.empty(n)
    for i in range(n):
        total = 0.0
        for f in range(F):
            value = (D[i, f] - a[i] * c[f]) * M[i, f]
            D[i, f] = value
            total += value
        sums[i] = total
    return sums


def _by_cluster(cluster, vectors, features_, k: int, out: np.ndarray) -> np.ndarray:
    """``out[c k:(c + 1) k] = sum over rows r of cluster c of outer(vectors_r, features_r)``
    (one k x F product per cluster; ``out`` (n, F))."""
    order = np.argsort(cluster, kind="stable")
    bounds = np.searchsorted(cluster[order], np.arange(len(out) // k + 1))
    sorted_vectors, sorted_features = np.ascontiguousarray(vectors[order].T), features_[order]
    for c in range(len(bounds) - 1):
        lo, hi = bounds[c], bounds[c + 1]
        if hi > lo:
            np.dot(sorted_vectors[:, lo:hi], sorted_features[lo:hi], out=out[c * k : (c + 1) * k])
        else:
            out[c * k : (c + 1) * k] = 0
    return out


def _kernel_gradient(t: Kernel, parts: KernelBlocks, s: blocked.Statistics, r: Restriction, work):
    """The kernel's gradient (the module's docstring); ``t`` the sub-model's kernel."""
    f, k, n = s.transition, r.blocks.states, len(t.U)
    L, R = parts.T.L, parts.T.R
    dtype = L.dtype
    h = s.visits.astype(dtype)
    # sum_j G_ij R_j and sum_i G_ij L_i, the band's entries included
    dX = _by_cluster(f.source, f.before, f.q, k, scratch(work, "dX", L.shape, dtype))
    dY = _by_cluster(f.target, f.after, f.y, k, scratch(work, "dY", L.shape, dtype))
    if r.indices.size:  # the band's entries are not the product's: take them out again
        G = sp.csr_array((f.band, r.indices, r.indptr), shape=(n, n))
        ones = sp.csr_array((np.ones(r.indices.size), r.indices, r.indptr), shape=(n, n))
        dX += (h[:, None] * (ones @ R) - G @ R).astype(dtype)
        dY += (ones.T @ (h[:, None] * L) - G.T @ L).astype(dtype)
    # dX = (dL - h sum_j R_j) / z * phi(U) = (...) * L; dY = (dR - sum_i h_i L_i) * phi(V)
    row_x = _contract(dX, L, h, R.sum(axis=0))
    row_y = _contract(dY, R, np.ones(n, dtype), h @ L)
    rows = entry_rows(r.indptr)
    return Kernel(
        dX @ t.W - row_x.astype(dtype)[:, None] * t.U,
        dY @ t.W - row_y.astype(dtype)[:, None] * t.V,
        dX.T @ t.U + dY.T @ t.V,
        (parts.band * (f.band - h[rows])).astype(dtype),
    )


def batch_gradient(
    p: Parameters, blocks: Blocks, tokens: np.ndarray, r: Restriction, work: Workspace | None = None
):
    """``(log evidence, gradient)`` of the batch ``tokens`` (B, T) under the sub-model
    ``r`` of ``p`` (``full`` for the whole model); the gradient is the full model's.
    With ``work``, large gradients live in its buffers until the next call."""
    sub = restrict(p, r, work)
    prior = softmax_rows(sub.prior)
    emission = emission_probabilities(sub.emission, r.blocks)
    coded = blocked.code(tokens, blocks)
    if isinstance(sub.transition, Softmax):
        T = softmax_in_place(sub.transition.logits)
        s = blocked.statistics(prior, emission, r.blocks, T, coded, work)
        d_transition = s.transition
        d_transition -= s.visits.astype(T.dtype)[:, None]
        d_transition *= T
        d_transition = Softmax(d_transition)
    else:
        parts = kernel_blocks(sub.transition, r, work)
        s = blocked.statistics(prior, emission, r.blocks, parts.T, coded, work)
        d_transition = _kernel_gradient(sub.transition, parts, s, r, work)
    d_emission = np.empty_like(sub.emission)
    k = r.blocks.states
    for c in range(r.blocks.n_clusters):
        lo, hi = k * r.blocks.starts[c], k * r.blocks.starts[c + 1]
        counts = s.emission_counts[lo:hi].reshape(k, -1)
        probabilities = emission[lo:hi].reshape(k, -1)
        d_emission[lo:hi] = (counts - counts.sum(axis=1, keepdims=True) * probabilities).ravel()
    grad = Parameters(
        (s.posterior_start - len(tokens) * prior).astype(sub.prior.dtype),
        d_emission,
        d_transition,
    )
    return s.log_evidence, expand(grad, r, p, work)


def transition_blocks(t, r: Restriction, work: Workspace | None = None):
    """What ``blocked.log_evidence`` steps for the sub-model's transitions ``t`` (copies,
    overwritten): the dense matrix or the low-rank blocks."""
    return softmax_in_place(t.logits) if isinstance(t, Softmax) else kernel_blocks(t, r, work).T


def log_evidence(
    p: Parameters, blocks: Blocks, chunks: np.ndarray, batch: int = 256, work=None
) -> float:
    """``sum log P(chunk)`` over the rows of ``chunks`` (M, T) under the whole model,
    ``batch`` rows at a time."""
    r = full(blocks, p.transition.band.shape[1] if isinstance(p.transition, Kernel) else 0)
    sub = restrict(p, r, work)
    prior = softmax_rows(sub.prior)
    emission = emission_probabilities(sub.emission, r.blocks)
    T = transition_blocks(sub.transition, r, work)
    return sum(
        blocked.log_evidence(
            prior, emission, r.blocks, T, blocked.code(chunks[k : k + batch], blocks)
        )
        for k in range(0, len(chunks), batch)
    )
