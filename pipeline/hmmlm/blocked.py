"""The forward-backward recursion of a blocked HMM LM, compiled: one k x k block per token,
the sequences of a batch in parallel.

With blocked emissions (``pipeline.hmmlm.clusters``) the states that can emit token
``x_t`` are the k states of its cluster ``c_t``, so the filtered belief ``alpha_t`` lives
on k states and a step reads the block ``T[c_{t-1}, c_t]`` (k x k) of the transition
matrix: ``alpha_t ~ (alpha_{t-1} T[c_{t-1}, c_t]) * e_t`` with ``e_t[i] = P(x_t | state i
of c_t)``. Two kinds of blocks:

- dense (``DenseBlocks``: the softmax and the neural parameterisation): the blocks the
  tokens visit, each k x k, and which (source, target) cluster pair each one is; k^2 per
  token;
- low rank (``LowRankBlocks``: the kernel): ``T[a, b] = L_a R_b^T`` with ``L = diag(1/z)
  phi(U)``, ``R = phi(V)`` (n, F), computed as ``(alpha L_a) R_b^T``, 2 k F per token,
  plus a sparse correction ``S`` (CSR, n x n) on the entries of a band: ``T = L R^T + S``.

Emissions are stored by cluster: ``emission`` is flat (k V,), cluster c's block (k, m_c)
(its k states over its m_c words, row-major) starting at ``k * starts[c]``.

A sequence starts either from the prior or, carried over from the segment before it (the
state carried across segments of one stream), from that segment's last belief: then its
coded tokens begin with that segment's last token, whose belief (k,) over its cluster's
states is given (``carry``), and the first scale (that token's, already counted) is left
out of the evidence. Either way the last beliefs (B, k) come back as the next segment's
carry.

The sequences run in parallel (numba ``prange``, as many threads as ``numba`` has); each
writes only its own rows of the per-token and per-transition arrays, and the sums over
the batch (emission counts, visits, the dense blocks' gradient, the band's) are made
afterwards in a fixed order, so a batch's statistics do not depend on the threads.

Why this recursion is not ``pipeline.inference``'s, though it is the same one: a blocked
sequence is an HMM over the k states of each token's cluster whose transitions change with
time (step t's is the block ``T[c_{t-1}, c_t]``, its likelihoods ``e_t``), which
``pipeline.inference.smoothing`` takes as ``transitions=``, and on a model as an ``HMM``
(the unblocked emissions, zero outside the clusters) ``smoothing`` gives the statistics
here to rounding (``tests/hmmlm/test_blocked.py``). But training an LM runs this recursion
over every token of every batch: here a step is its k^2 or 2 k F multiply-adds inside one
compiled loop, the sequences in parallel, in the parameters' precision (float32 in
training), where ``pipeline.inference`` steps time-varying transitions from Python, a call
of the step-operator protocol per token in float64, whose overhead is many times a small
block's arithmetic; and its compiled recursions multiply by a whole constant n x n
transition (n^2 or 2 n F work a step). Its convention for an impossible token is moot: the
emissions are softmax probabilities and the blocks a softmax's or a kernel's, all positive,
so no step's evidence is zero.

The statistics of the gradient (``Statistics``) are what ``pipeline.hmmlm.evidence``
gives for an unblocked model, restricted to the blocks: the posteriors, and per
transition ``t - 1 -> t`` the belief ``alpha_{t-1}`` and ``g_t = e_t * beta_t / c_t``, so
that ``d log P / d T[i, j] = sum_t alpha_{t-1}[i] g_t[j]`` within the blocks. For a
low-rank model they come with ``y_t = alpha_{t-1} L_a`` and ``q_t = g_t R_b`` (F each) for
the parameterisation to contract by cluster (``pipeline.hmmlm.blocks``).

This module is longer than most (about 460 lines) because its compiled forward and backward
passes and the plain-Python driver that calls them stay together, as ``pipeline.kernels``'
do, for numba's cache: a cached recursion is checked against its own source file only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numba
import numpy as np

if TYPE_CHECKING:
    from pipeline.kernels import JitOptions

JIT: JitOptions = {"cache": True, "nogil": True, "fastmath": True}
PARALLEL: JitOptions = {**JIT, "parallel": True}


class Coded(NamedTuple):
    """Tokens (B, T) as their clusters and their positions among the cluster's words."""

    cluster: np.ndarray  # (B, T) int64
    position: np.ndarray  # (B, T) int64


class DenseBlocks(NamedTuple):
    """The k x k blocks of a dense transition matrix that a batch visits.

    values : (P, k, k) ``T[a, b]`` (rows: the k states of cluster a; columns: b's).
    slot : (C, C) int64, the block of (a, b) in ``values``; -1 where none is.
    """

    values: np.ndarray
    slot: np.ndarray


class LowRankBlocks(NamedTuple):
    """``T = L R^T + S``: ``L`` (n, F) and ``R`` (n, F), ``S`` a CSR (n, n) correction."""

    L: np.ndarray
    R: np.ndarray
    indptr: np.ndarray  # (n + 1,) int64
    indices: np.ndarray  # (nnz,) int64
    data: np.ndarray  # (nnz,)


class Transitions(NamedTuple):
    """Per transition ``t - 1 -> t`` of a batch (N = B (T - 1) of them, sequence by sequence).

    Attributes
    ----------
    source
        (N,) int64, the cluster c_{t-1}.
    target
        (N,) int64, the cluster c_t.
    before
        (N, k), alpha_{t-1} over the states of c_{t-1}.
    after
        (N, k), g_t over the states of c_t.
    y
        (N, F), alpha_{t-1} L[c_{t-1}], the transitions sorted by ``target`` (stably); low
        rank only ((N, 0) for dense blocks).
    q
        (N, F), g_t R[c_t], the transitions sorted by ``source`` (stably); low rank only.
    """

    source: np.ndarray
    target: np.ndarray
    before: np.ndarray
    after: np.ndarray
    y: np.ndarray
    q: np.ndarray


class Statistics(NamedTuple):
    """What the gradient of one batch's log evidence needs.

    Attributes
    ----------
    log_evidence
        float, ``sum over sequences of log P(tokens | what was carried)``.
    posterior_start
        (n,), ``sum_b P(S_0 | tokens_b)`` over the sequences that start from
        the prior (zero when carried).
    emission_counts
        (k V,) flat like the emissions, ``sum_{b,t} P(S_t = i | tokens_b)``
        at (i, x_t).
    visits
        (n,), ``sum_{b,t} P(S_{t-1} = i | tokens_b)`` over the transitions, the
        expected transitions out of each state (``h_i = sum_j G_ij T_ij``).
    transitions
        the ``Transitions`` of the batch.
    last
        (B, k), the belief at each sequence's last token (the next segment's carry).
    """

    log_evidence: float
    posterior_start: np.ndarray
    emission_counts: np.ndarray
    visits: np.ndarray
    transitions: Transitions
    last: np.ndarray


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
def _start(prior, emission, starts, k, cluster, position, carry, e, alpha):
    """The first belief of a sequence into ``alpha[0]``: ``carry`` if it has entries (then
    the log scale is 0: that token was scored with the segment before), else the prior
    times the first emission. Returns the log of its scale."""
    if carry.size:
        alpha[0] = carry
        return 0.0
    c = cluster[0]
    _emission(emission, starts, k, c, position[0], e)
    for i in range(k):
        e[i] *= prior[c * k + i]
    return np.log(_normalise(e, alpha[0]))


@numba.njit(**JIT)
def _dense_step(alpha, block, out):
    """``out = alpha @ block`` (k,)."""
    k = out.size
    out[:] = 0.0
    for i in range(k):
        weight = alpha[i]
        for j in range(k):
            out[j] += weight * block[i, j]


@numba.njit(**JIT)
def _dense_back(g, block, out):
    """``out = block @ g`` (k,)."""
    k = out.size
    for i in range(k):
        acc = 0.0
        for j in range(k):
            acc += block[i, j] * g[j]
        out[i] = acc


@numba.njit(**JIT)
def _lowrank_step(alpha, L, R, a, c, indptr, indices, data, features, out):
    """``features = alpha L_a`` (F,), ``out = features R_c^T + alpha S[a, c]`` (k,)."""
    k, F = out.size, L.shape[1]
    features[:] = 0.0
    for i in range(k):
        weight = alpha[i]
        for f in range(F):
            features[f] += weight * L[a + i, f]
    for j in range(k):
        total = 0.0
        for f in range(F):
            total += R[c + j, f] * features[f]
        out[j] = total
    for i in range(k):
        for x in range(indptr[a + i], indptr[a + i + 1]):
            j = indices[x] - c
            if 0 <= j < k:
                out[j] += alpha[i] * data[x]


@numba.njit(**JIT)
def _lowrank_back(g, L, R, a, c, indptr, indices, data, features, out):
    """``features = g R_c`` (F,), ``out = L_a features + S[a, c] g`` (k,)."""
    k, F = out.size, L.shape[1]
    features[:] = 0.0
    for j in range(k):
        for f in range(F):
            features[f] += g[j] * R[c + j, f]
    for i in range(k):
        acc = 0.0
        for f in range(F):
            acc += L[a + i, f] * features[f]
        for x in range(indptr[a + i], indptr[a + i + 1]):
            j = indices[x] - c
            if 0 <= j < k:
                acc += data[x] * g[j]
        out[i] = acc


@numba.njit(**PARALLEL)
def _dense(prior, emission, starts, k, values, slot, cluster, position, carry, alpha, after,
           posterior, log_scale, backward):  # fmt: skip
    """The recursion of every sequence b under dense blocks: ``alpha`` (B, T, k) the
    filtered beliefs, ``log_scale`` (B,) the log evidence of each; with ``backward`` also
    ``after`` (B, T - 1, k) the g of each transition and ``posterior`` (B, T, k)."""
    B, steps = cluster.shape
    for b in numba.prange(B):
        e, pred = np.empty(k, values.dtype), np.empty(k, values.dtype)
        beta, scales = np.ones(k, values.dtype), np.empty(steps)
        total = _start(prior, emission, starts, k, cluster[b], position[b], carry[b], e, alpha[b])
        for t in range(1, steps):
            block = values[slot[cluster[b, t - 1], cluster[b, t]]]
            _dense_step(alpha[b, t - 1], block, pred)
            _emission(emission, starts, k, cluster[b, t], position[b, t], e)
            for j in range(k):
                pred[j] *= e[j]
            scales[t] = _normalise(pred, alpha[b, t])
            total += np.log(scales[t])
        log_scale[b] = total
        if not backward:
            continue
        for t in range(steps - 1, 0, -1):
            _emission(emission, starts, k, cluster[b, t], position[b, t], e)
            for j in range(k):
                posterior[b, t, j] = alpha[b, t, j] * beta[j]
                after[b, t - 1, j] = e[j] * beta[j] / scales[t]
            _dense_back(after[b, t - 1], values[slot[cluster[b, t - 1], cluster[b, t]]], beta)
        for j in range(k):
            posterior[b, 0, j] = alpha[b, 0, j] * beta[j]


@numba.njit(**PARALLEL)
def _lowrank(prior, emission, starts, k, L, R, indptr, indices, data, cluster, position, carry,
             alpha, after, posterior, y, q, row_y, row_q, log_scale, backward):  # fmt: skip
    """As ``_dense`` for ``T = L R^T + S``; with ``backward`` also ``y`` and ``q``
    (B (T - 1), F) of every transition, that of ``t - 1 -> t`` in sequence b at the rows
    ``row_y[b, t - 1]`` and ``row_q[b, t - 1]``."""
    B, steps = cluster.shape
    F = L.shape[1]
    for b in numba.prange(B):
        e, pred = np.empty(k, L.dtype), np.empty(k, L.dtype)
        features, beta = np.empty(F, L.dtype), np.ones(k, L.dtype)
        scales = np.empty(steps)
        total = _start(prior, emission, starts, k, cluster[b], position[b], carry[b], e, alpha[b])
        for t in range(1, steps):
            a, c = cluster[b, t - 1] * k, cluster[b, t] * k
            out = y[row_y[b, t - 1]] if backward else features
            _lowrank_step(alpha[b, t - 1], L, R, a, c, indptr, indices, data, out, pred)
            _emission(emission, starts, k, cluster[b, t], position[b, t], e)
            for j in range(k):
                pred[j] *= e[j]
            scales[t] = _normalise(pred, alpha[b, t])
            total += np.log(scales[t])
        log_scale[b] = total
        if not backward:
            continue
        for t in range(steps - 1, 0, -1):
            a, c = cluster[b, t - 1] * k, cluster[b, t] * k
            _emission(emission, starts, k, cluster[b, t], position[b, t], e)
            for j in range(k):
                posterior[b, t, j] = alpha[b, t, j] * beta[j]
                after[b, t - 1, j] = e[j] * beta[j] / scales[t]
            _lowrank_back(after[b, t - 1], L, R, a, c, indptr, indices, data, q[row_q[b, t - 1]],
                          beta)  # fmt: skip
        for j in range(k):
            posterior[b, 0, j] = alpha[b, 0, j] * beta[j]


@numba.njit(**JIT)
def _sums(emission, starts, k, cluster, position, posterior, carried, counts, visits, first):
    """The batch's emission counts, visits and posterior starts from the posteriors
    (B, T, k), in a fixed order; a carried sequence's first token adds to visits only."""
    B, steps = cluster.shape
    for b in range(B):
        for t in range(steps):
            c = cluster[b, t]
            m = starts[c + 1] - starts[c]
            base = k * starts[c] + position[b, t]
            for i in range(k):
                p = posterior[b, t, i]
                if t > 0 or not carried:
                    counts[base + i * m] += p
                if t < steps - 1:
                    visits[c * k + i] += p
                if t == 0 and not carried:
                    first[c * k + i] += p


def _run(
    prior, emission, blocks, T: DenseBlocks | LowRankBlocks, coded: Coded, carry, backward: bool
):
    """The compiled recursion; the arrays it fills."""
    B, steps = coded.cluster.shape
    k, dtype = blocks.states, emission.dtype
    carried = np.empty((B, 0), dtype) if carry is None else np.ascontiguousarray(carry, dtype)
    alpha = np.empty((B, steps, k), dtype)
    shape = (B, steps - 1, k) if backward else (0, 0, 0)
    after, posterior = np.empty(shape, dtype), np.empty((B, steps, k) if backward else shape, dtype)
    log_scale = np.empty(B)
    head = (prior, emission, blocks.starts, blocks.states)
    filled = (*coded, carried, alpha, after, posterior)
    N = B * max(steps - 1, 0)
    if isinstance(T, DenseBlocks):
        _dense(*head, *T, *filled, log_scale, backward)
        y = q = np.empty((N, 0), dtype)
    else:
        F = T.L.shape[1]
        y = np.empty((N, F) if backward else (0, 0), dtype)
        q = np.empty_like(y)
        row_y, row_q = (
            _rows_by_cluster(coded.cluster[:, 1:]),
            _rows_by_cluster(coded.cluster[:, :-1]),
        )
        _lowrank(*head, *T, *filled, y, q, row_y, row_q, log_scale, backward)
    return alpha, after, posterior, y, q, float(log_scale.sum())


def _rows_by_cluster(cluster: np.ndarray) -> np.ndarray:
    """The row (B, T - 1) of each transition among them all sorted by ``cluster`` (B, T - 1)
    (stably: within a cluster in sequence order), where the recursion writes its vector, so
    that each cluster's vectors are one contiguous block for its product."""
    rows = np.empty(cluster.size, np.int64)
    rows[np.argsort(cluster.ravel(), kind="stable")] = np.arange(cluster.size)
    return rows.reshape(cluster.shape)


def log_evidence(prior, emission, blocks, T, coded: Coded, carry=None) -> tuple[float, np.ndarray]:
    """``sum over sequences of log P(tokens)`` by the forward recursion alone, and the
    last beliefs (B, k).

    ``prior`` (n,), ``emission`` flat (k V,) (the module's layout), ``blocks`` the
    ``clusters.Blocks``, ``T`` ``DenseBlocks`` or ``LowRankBlocks``, ``coded`` the tokens
    (B, T) as ``code`` gives them; ``carry`` (B, k) the beliefs carried into each sequence
    (then ``coded`` starts with the previous segment's last token), None: from the prior.
    """
    alpha, *_, total = _run(prior, emission, blocks, T, coded, carry, backward=False)
    return total, alpha[:, -1]


def statistics(prior, emission, blocks, T, coded: Coded, carry=None) -> Statistics:
    """The forward-backward recursion over a batch (arguments as for ``log_evidence``)."""
    n, k = blocks.n_states, blocks.states
    alpha, after, posterior, y, q, total = _run(
        prior, emission, blocks, T, coded, carry, backward=True
    )
    counts, visits, first = np.zeros(emission.size), np.zeros(n), np.zeros(n)
    _sums(emission, blocks.starts, k, *coded, posterior, carry is not None, counts, visits, first)
    B, steps = coded.cluster.shape
    N = B * (steps - 1)
    transitions = Transitions(
        coded.cluster[:, :-1].ravel(),
        coded.cluster[:, 1:].ravel(),
        alpha[:, :-1].reshape(N, k),
        after.reshape(N, k),
        y,
        q,
    )
    return Statistics(total, first, counts, visits, transitions, alpha[:, -1].copy())


@numba.njit(**JIT)
def _block_sums(source, target, before, after, slot, out):
    """``out[slot[a, c]] += outer(before_t, after_t)`` over the transitions, in order."""
    k = before.shape[1]
    for t in range(source.size):
        block = out[slot[source[t], target[t]]]
        for i in range(k):
            weight = before[t, i]
            for j in range(k):
                block[i, j] += weight * after[t, j]


def block_gradient(s: Transitions, slot: np.ndarray, n_blocks: int) -> np.ndarray:
    """``G`` on the dense blocks (P, k, k): ``sum_t alpha_{t-1}^T g_t`` of each block's
    transitions, the gradient of the log evidence with respect to its entries."""
    k = s.before.shape[1]
    out = np.zeros((n_blocks, k, k), s.before.dtype)
    _block_sums(s.source, s.target, s.before, s.after, slot, out)
    return out


@numba.njit(**JIT)
def _band_sums(source, target, before, after, k, indptr, indices, out):
    for t in range(source.size):
        a, c = source[t] * k, target[t] * k
        for i in range(k):
            for x in range(indptr[a + i], indptr[a + i + 1]):
                j = indices[x] - c
                if 0 <= j < k:
                    out[x] += before[t, i] * after[t, j]


def band_gradient(s: Transitions, T: LowRankBlocks) -> np.ndarray:
    """``sum_t alpha_{t-1}[i] g_t[j]`` at each entry (i, j) of the correction (nnz,)."""
    out = np.zeros(T.data.size)
    k = s.before.shape[1]
    _band_sums(s.source, s.target, s.before, s.after, k, T.indptr, T.indices, out)
    return out


def visited(coded: Coded, n_clusters: int) -> np.ndarray:
    """The slots of the (source, target) cluster pairs of a batch's transitions: (C, C)
    int64, -1 for pairs not visited, the others numbered in row-major order."""
    pairs = np.zeros((n_clusters, n_clusters), bool)
    pairs[coded.cluster[:, :-1], coded.cluster[:, 1:]] = True
    slot = np.full(pairs.shape, -1, np.int64)
    slot[pairs] = np.arange(int(pairs.sum()))
    return slot


def code(tokens: np.ndarray, blocks) -> Coded:
    """Tokens (B, T) as the cluster of each and its position among the cluster's words."""
    tokens = np.asarray(tokens)
    return Coded(blocks.cluster[tokens], blocks.position[tokens])
