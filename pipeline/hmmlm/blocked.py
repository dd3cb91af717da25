"""The forward-backward recursion of a blocked HMM LM, compiled: one k x k block per token.

With blocked emissions (``pipeline.hmmlm.clusters``) the states that can emit token
``x_t`` are the k states of its cluster ``c_t``, so the filtered belief ``alpha_t`` lives
on k states and a step reads the block ``T[c_{t-1}, c_t]`` (k x k) of the transition
matrix: ``alpha_t ~ (alpha_{t-1} T[c_{t-1}, c_t]) * e_t`` with ``e_t[i] = P(x_t | state i
of c_t)``. Two kinds of blocks:

- dense (the softmax): the block is read from the (n, n) matrix, k^2 per token;
- low rank (the kernel): ``T[a, b] = L_a R_b^T`` with ``L = diag(1/z) phi(U)``, ``R =
  phi(V)`` (n, F), computed as ``(alpha L_a) R_b^T``, 2 k F per token, plus a sparse
  correction ``S`` (CSR, n x n) on the entries of a band: ``T = L R^T + S``.

Emissions are stored by cluster: ``emission`` is flat (k V,), cluster c's block (k, m_c)
(its k states over its m_c words, row-major) starting at ``k * starts[c]``.

The statistics of the gradient (``Statistics``) are what ``pipeline.hmmlm.evidence``
gives for an unblocked model, restricted to the blocks: the posteriors, and per
transition ``t - 1 -> t`` the belief ``alpha_{t-1}`` and ``g_t = e_t * beta_t / c_t``, so
that ``d log P / d T[i, j] = sum_t alpha_{t-1}[i] g_t[j]`` within the blocks. For a dense
model they are summed into ``G`` (n, n) on the spot; for a low-rank one they are kept with
``y_t = alpha_{t-1} L_a`` and ``q_t = g_t R_b`` (F each) for the parameterisation to
contract by cluster (``pipeline.hmmlm.blocks``).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from pipeline.hmmlm.workspace import Workspace, scratch

JIT = {"cache": True, "nogil": True, "fastmath": True}


class Coded(NamedTuple):
    """Tokens (B, T) as their clusters and their positions among the cluster's words."""

    cluster: np.ndarray  # (B, T) int64
    position: np.ndarray  # (B, T) int64


class Features(NamedTuple):
    """Per transition ``t - 1 -> t`` of a low-rank model (N = B (T - 1) of them)."""

    source: np.ndarray  # (N,) int64 cluster c_{t-1}
    target: np.ndarray  # (N,) int64 cluster c_t
    before: np.ndarray  # (N, k) alpha_{t-1} over the states of c_{t-1}
    after: np.ndarray  # (N, k) g_t over the states of c_t
    y: np.ndarray  # (N, F) alpha_{t-1} L[c_{t-1}]
    q: np.ndarray  # (N, F) g_t R[c_t]
    band: np.ndarray  # (nnz,) sum_t alpha_{t-1}[i] g_t[j] at each entry of the correction


class Statistics(NamedTuple):
    """What the gradient of one batch's log evidence needs.

    log_evidence : float, ``sum over sequences of log P(tokens)``.
    posterior_start : (n,), ``sum_b P(S_0 | tokens_b)``.
    emission_counts : (k V,) flat like the emissions, ``sum_{b,t} P(S_t = i | tokens_b)``
        at (i, x_t).
    visits : (n,), ``sum_{b, t < T - 1} P(S_t = i | tokens_b)``, the expected transitions
        out of each state (``h_i = sum_j G_ij T_ij``).
    transition : ``G`` (n, n) for a dense model (zero outside the visited blocks), the
        ``Features`` of a low-rank one.
    """

    log_evidence: float
    posterior_start: np.ndarray
    emission_counts: np.ndarray
    visits: np.ndarray
    transition: np.ndarray | Features


@numba.njit(**JIT)
def _emission(emission, starts, k, c, position, out):
    """``out[i] = P(word | state i of cluster c)`` for the word at ``position`` in c."""
    m = starts[c + 1] - starts[c]
    base = k * starts[c] + position
    for i in range(k):
        out[i] = emission[base + i * m]


@numba.njit(**JIT)
def _normalise(values, out):
    """``out = values / sum(values)``; returns the sum."""
    total = 0.0
    for i in range(values.size):
        total += values[i]
    for i in range(values.size):
        out[i] = values[i] / total
    return total


@numba.njit(**JIT)
def _correct(alpha, band_indptr, band_indices, band_data, row0, col0, k, out):
    """``out += alpha S[row0:row0 + k, col0:col0 + k]`` (S the CSR correction)."""
    for i in range(k):
        for e in range(band_indptr[row0 + i], band_indptr[row0 + i + 1]):
            j = band_indices[e] - col0
            if 0 <= j < k:
                out[j] += alpha[i] * band_data[e]


@numba.njit(**JIT)
def _start(prior, emission, starts, k, cluster, position, e, alpha):
    """The first belief of a sequence into ``alpha[0]``; returns its scale."""
    c = cluster[0]
    _emission(emission, starts, k, c, position[0], e)
    for i in range(k):
        e[i] *= prior[c * k + i]
    return _normalise(e, alpha[0])


@numba.njit(**JIT)
def _dense_forward(prior, emission, starts, k, T, cluster, position, alpha, scale):
    """Beliefs ``alpha`` (T, k) and scales (T,) of one sequence under a dense T."""
    e, pred = np.empty(k, dtype=T.dtype), np.empty(k, dtype=T.dtype)
    scale[0] = _start(prior, emission, starts, k, cluster, position, e, alpha)
    for t in range(1, cluster.size):
        a, c = cluster[t - 1] * k, cluster[t] * k
        pred[:] = 0.0
        for i in range(k):
            weight = alpha[t - 1, i]
            for j in range(k):
                pred[j] += weight * T[a + i, c + j]
        _emission(emission, starts, k, cluster[t], position[t], e)
        for j in range(k):
            pred[j] *= e[j]
        scale[t] = _normalise(pred, alpha[t])


@numba.njit(**JIT)
def _lowrank_forward(
    prior, emission, starts, k, L, R, band_indptr, band_indices, band_data,
    cluster, position, alpha, scale, y, row,
):  # fmt: skip
    """As ``_dense_forward`` for ``T = L R^T + S``; ``y[row + t - 1] = alpha_{t-1} L_a``
    when ``y`` has rows (training), else a scratch row is used."""
    F = L.shape[1]
    e, pred, scratch = np.empty(k, L.dtype), np.empty(k, L.dtype), np.empty(F, dtype=y.dtype)
    scale[0] = _start(prior, emission, starts, k, cluster, position, e, alpha)
    for t in range(1, cluster.size):
        a, c = cluster[t - 1] * k, cluster[t] * k
        features = y[row + t - 1] if y.shape[0] else scratch
        features[:] = 0.0
        for i in range(k):
            weight = alpha[t - 1, i]
            for f in range(F):
                features[f] += weight * L[a + i, f]
        for j in range(k):
            total = 0.0
            for f in range(F):
                total += R[c + j, f] * features[f]
            pred[j] = total
        _correct(alpha[t - 1], band_indptr, band_indices, band_data, a, c, k, pred)
        _emission(emission, starts, k, cluster[t], position[t], e)
        for j in range(k):
            pred[j] *= e[j]
        scale[t] = _normalise(pred, alpha[t])


@numba.njit(**JIT)
def _posterior(alpha_t, beta, emission, starts, k, c, position, counts, visits, t, last):
    """Add ``P(S_t | x) = alpha_t * beta_t`` to the emission counts, and to ``visits``
    unless t is the last step."""
    m = starts[c + 1] - starts[c]
    base = k * starts[c] + position
    for i in range(k):
        p = alpha_t[i] * beta[i]
        counts[base + i * m] += p
        if t < last:
            visits[c * k + i] += p


@numba.njit(**JIT)
def _step_back(alpha_t, beta, scale_t, emission, starts, k, c, position, counts, visits, t,
               last, e, g):  # fmt: skip
    """At step t > 0 of the backward pass: add ``P(S_t | x)`` to the counts (``_posterior``)
    and set ``g = e_t * beta_t / c_t`` (k,) over the states of the token's cluster ``c``."""
    _posterior(alpha_t, beta, emission, starts, k, c, position, counts, visits, t, last)
    _emission(emission, starts, k, c, position, e)
    for j in range(k):
        g[j] = e[j] * beta[j] / scale_t


@numba.njit(**JIT)
def _finish(alpha_0, beta, emission, starts, k, c, position, counts, visits, first, last):
    """Step 0 of the backward pass: ``P(S_0 | x)`` into the counts and into ``first``."""
    _posterior(alpha_0, beta, emission, starts, k, c, position, counts, visits, 0, last)
    for i in range(k):
        first[c * k + i] += alpha_0[i] * beta[i]


@numba.njit(**JIT)
def _dense_statistics(prior, emission, starts, k, T, cluster, position, G, counts, visits, first):
    """The whole recursion of a batch under a dense T; returns the log evidence."""
    B, steps = cluster.shape
    alpha, scale = np.empty((steps, k), dtype=T.dtype), np.empty(steps)
    e, g = np.empty(k, dtype=T.dtype), np.empty(k, dtype=T.dtype)
    beta, previous = np.empty(k, dtype=T.dtype), np.empty(k, dtype=T.dtype)
    total = 0.0
    for b in range(B):
        _dense_forward(prior, emission, starts, k, T, cluster[b], position[b], alpha, scale)
        total += np.log(scale).sum()
        beta[:] = 1.0
        for t in range(steps - 1, 0, -1):
            a, c = cluster[b, t - 1] * k, cluster[b, t] * k
            _step_back(alpha[t], beta, scale[t], emission, starts, k, cluster[b, t],
                       position[b, t], counts, visits, t, steps - 1, e, g)  # fmt: skip
            for i in range(k):
                weight, acc = alpha[t - 1, i], 0.0
                for j in range(k):
                    acc += T[a + i, c + j] * g[j]
                    G[a + i, c + j] += weight * g[j]
                previous[i] = acc
            beta[:] = previous
        _finish(alpha[0], beta, emission, starts, k, cluster[b, 0], position[b, 0], counts,
                visits, first, steps - 1)  # fmt: skip
    return total


@numba.njit(**JIT)
def _lowrank_statistics(
    prior, emission, starts, k, L, R, band_indptr, band_indices, band_data,
    cluster, position, counts, visits, first, before, after, y, q, band_counts,
):  # fmt: skip
    """The whole recursion of a batch under ``T = L R^T + S``; returns the log evidence."""
    B, steps = cluster.shape
    F = L.shape[1]
    alpha, scale = np.empty((steps, k), dtype=L.dtype), np.empty(steps)
    e, g, beta = np.empty(k, L.dtype), np.empty(k, L.dtype), np.empty(k, L.dtype)
    total = 0.0
    for b in range(B):
        row = b * (steps - 1)
        _lowrank_forward(prior, emission, starts, k, L, R, band_indptr, band_indices, band_data,
                         cluster[b], position[b], alpha, scale, y, row)  # fmt: skip
        total += np.log(scale).sum()
        beta[:] = 1.0
        for t in range(steps - 1, 0, -1):
            a, c = cluster[b, t - 1] * k, cluster[b, t] * k
            _step_back(alpha[t], beta, scale[t], emission, starts, k, cluster[b, t],
                       position[b, t], counts, visits, t, steps - 1, e, g)  # fmt: skip
            n = row + t - 1
            for j in range(k):
                after[n, j] = g[j]
                before[n, j] = alpha[t - 1, j]
            features = q[n]
            features[:] = 0.0
            for j in range(k):
                for f in range(F):
                    features[f] += g[j] * R[c + j, f]
            for i in range(k):
                acc = 0.0
                for f in range(F):
                    acc += L[a + i, f] * features[f]
                beta[i] = acc
                for x in range(band_indptr[a + i], band_indptr[a + i + 1]):
                    j = band_indices[x] - c
                    if 0 <= j < k:
                        beta[i] += band_data[x] * g[j]
                        band_counts[x] += alpha[t - 1, i] * g[j]
        _finish(alpha[0], beta, emission, starts, k, cluster[b, 0], position[b, 0], counts,
                visits, first, steps - 1)  # fmt: skip
    return total


@numba.njit(**JIT)
def _dense_log_evidence(prior, emission, starts, k, T, cluster, position):
    B, steps = cluster.shape
    alpha, scale = np.empty((steps, k), dtype=T.dtype), np.empty(steps)
    total = 0.0
    for b in range(B):
        _dense_forward(prior, emission, starts, k, T, cluster[b], position[b], alpha, scale)
        total += np.log(scale).sum()
    return total


@numba.njit(**JIT)
def _lowrank_log_evidence(
    prior, emission, starts, k, L, R, band_indptr, band_indices, band_data, cluster, position
):
    B, steps = cluster.shape
    alpha, scale = np.empty((steps, k), dtype=L.dtype), np.empty(steps)
    none = np.empty((0, L.shape[1]), dtype=L.dtype)
    total = 0.0
    for b in range(B):
        _lowrank_forward(prior, emission, starts, k, L, R, band_indptr, band_indices, band_data,
                         cluster[b], position[b], alpha, scale, none, 0)  # fmt: skip
        total += np.log(scale).sum()
    return total


class LowRankBlocks(NamedTuple):
    """``T = L R^T + S``: ``L`` (n, F) and ``R`` (n, F), ``S`` a CSR (n, n) correction."""

    L: np.ndarray
    R: np.ndarray
    indptr: np.ndarray  # (n + 1,) int64
    indices: np.ndarray  # (nnz,) int64
    data: np.ndarray  # (nnz,)


def _arguments(prior, emission, blocks, T) -> tuple:
    head = (prior, emission, blocks.starts, blocks.states)
    return (*head, T) if isinstance(T, np.ndarray) else (*head, *T)


def log_evidence(prior, emission, blocks, T, coded: Coded) -> float:
    """``sum over sequences of log P(tokens)`` by the forward recursion alone.

    ``prior`` (n,), ``emission`` flat (k V,) (the module's layout), ``blocks`` the
    ``clusters.Blocks``, ``T`` the dense (n, n) matrix or a ``LowRankBlocks``, ``coded``
    the tokens (B, T) as ``code`` gives them.
    """
    compiled = _dense_log_evidence if isinstance(T, np.ndarray) else _lowrank_log_evidence
    return float(compiled(*_arguments(prior, emission, blocks, T), *coded))


def statistics(
    prior, emission, blocks, T, coded: Coded, work: Workspace | None = None
) -> Statistics:
    """The forward-backward recursion over a batch (arguments as for ``log_evidence``;
    ``work`` keeps the large buffers from batch to batch)."""
    n, k = blocks.n_states, blocks.states
    counts, visits, first = np.zeros(emission.size), np.zeros(n), np.zeros(n)
    arguments = _arguments(prior, emission, blocks, T)
    if isinstance(T, np.ndarray):
        G = scratch(work, "G", T.shape, T.dtype)
        G.fill(0)
        total = _dense_statistics(*arguments, *coded, G, counts, visits, first)
        return Statistics(float(total), first, counts, visits, G)
    B, steps = coded.cluster.shape
    N, F, dtype = B * (steps - 1), T.L.shape[1], T.L.dtype
    before, after = np.empty((N, k), dtype=dtype), np.empty((N, k), dtype=dtype)
    y, q = scratch(work, "y", (N, F), dtype), scratch(work, "q", (N, F), dtype)
    band = np.zeros(T.data.size)
    total = _lowrank_statistics(
        *arguments, *coded, counts, visits, first, before, after, y, q, band
    )
    source, target = coded.cluster[:, :-1].ravel(), coded.cluster[:, 1:].ravel()
    features = Features(source, target, before, after, y, q, band)
    return Statistics(float(total), first, counts, visits, features)


def code(tokens: np.ndarray, blocks) -> Coded:
    """Tokens (B, T) as the cluster of each and its position among the cluster's words."""
    tokens = np.asarray(tokens)
    return Coded(blocks.cluster[tokens], blocks.position[tokens])
