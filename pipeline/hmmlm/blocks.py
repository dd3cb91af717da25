"""Blocked HMM LMs: parameters, their transitions' blocks, the gradient, state dropout.

A blocked model (``pipeline.hmmlm.clusters.Blocks``: C clusters of k states) has the
``Parameters`` of ``pipeline.hmmlm.parameters`` with one change: its emission logits are
flat (k V,), cluster c's (k, m_c) block (its states over its words) at ``k * starts[c]``,
a softmax over each row, so a state emits only its cluster's words. The transitions are a
``Softmax`` or a ``Neural`` (dense blocks: the visited k x k blocks of the matrix) or a
``Kernel`` (low-rank blocks, ``pipeline.hmmlm.blocked_kernel``; its band, if any, becomes
the sparse correction of ``pipeline.hmmlm.blocked``). Each kind is a small class
(``_Softmax``, ``_Neural``, ``_Kernel``, looked up by the transition's type) of three
functions: what it computes once per set of parameters (``setup``), the blocks a batch's
tokens read (``blocks``), and the gradient (``gradient``).

State dropout (the regulariser of Chiu and Rush 2020) trains each batch on a sub-model:
``Restriction`` keeps ``k'`` of every cluster's k states, and the sub-model is the model
restricted to them (the softmax over the kept states only, the kernel's normaliser over
the kept columns), itself a blocked model of C clusters of k' states. Its gradient is
scattered back (zero for the dropped states' parameters).

The gradient contracts the statistics of ``pipeline.hmmlm.blocked``: for the softmax
``d logits = T * (G - h)`` (n^2), for the neural one through the dot products and the MLP
(``pipeline.hmmlm.neural``), for a kernel by cluster (``pipeline.hmmlm.blocked_kernel``).

Training and evaluation run streams in segments with the state carried from one segment
to the next (``pipeline.hmmlm.blocked``); the carry is kept over every state of a cluster
(``carry_in``, ``carry_out``), so a sub-model of state dropout continues the belief of the
one before it over the states both keep.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numba
import numpy as np
import scipy.sparse as sp

from pipeline.hmmlm import blocked, blocked_kernel, neural
from pipeline.hmmlm.clusters import Blocks
from pipeline.hmmlm.neural import Neural
from pipeline.hmmlm.parameters import (
    Kernel,
    Parameters,
    Softmax,
    Transition,
    softmax_in_place,
    softmax_rows,
)
from pipeline.hmmlm.workspace import Workspace, scratch


class Restriction(NamedTuple):
    """A sub-model of a blocked model: the states kept and where its parameters come from.

    Attributes
    ----------
    states
        (n',) the kept states, sorted (``k'`` per cluster).
    emission
        (k' V,) the index of each sub-model emission logit in the model's.
    band
        (nnz,) the index of each band entry in the model's band logits (n, width),
        in the CSR order of ``indptr`` and ``indices`` (n' + 1,), (nnz,): the band's
        pattern over the kept states (``|i - j| < delta`` in the model's numbering).
    blocks
        the sub-model's blocks (the same words, ``k'`` states each).
    kept
        (C, k') the kept states of each cluster, as indices among its k states.
    """

    states: np.ndarray
    emission: np.ndarray
    band: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    blocks: Blocks
    kept: np.ndarray


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
        kept,
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
        transition: Transition = Softmax(out)
    elif isinstance(t, Neural):
        transition = t._replace(E=t.E[keep])
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
    t, whole, keep = grad.transition, like.transition, r.states
    prior, emission = np.zeros_like(like.prior), np.zeros_like(like.emission)
    prior[keep], emission[r.emission] = grad.prior, grad.emission
    if isinstance(t, Softmax):
        assert isinstance(whole, Softmax), "a gradient has its model's parameterisation"
        if keep.size == len(whole.logits):
            return Parameters(prior, emission, t)
        out = scratch(work, "d_logits", whole.logits.shape, t.logits.dtype)
        return Parameters(prior, emission, Softmax(_scatter(t.logits, keep, out)))
    if isinstance(t, Neural):
        assert isinstance(whole, Neural), "a gradient has its model's parameterisation"
        E = np.zeros_like(whole.E)
        E[keep] = t.E
        return Parameters(prior, emission, t._replace(E=E))
    assert isinstance(whole, Kernel), "a gradient has its model's parameterisation"
    U, V, band = (np.zeros_like(x) for x in (whole.U, whole.V, whole.band))
    U[keep], V[keep] = t.U, t.V
    band.ravel()[r.band] = t.band
    return Parameters(prior, emission, Kernel(U, V, t.W, band))


def _rows(blocks: Blocks) -> tuple[np.ndarray, np.ndarray]:
    """Where each state's row starts in the flat emissions (n,), and its length (n,): the
    words of its cluster."""
    lengths = np.repeat(np.diff(blocks.starts), blocks.states)
    return np.concatenate([[0], np.cumsum(lengths[:-1])]), lengths


def emission_probabilities(logits: np.ndarray, blocks: Blocks) -> np.ndarray:
    """The flat emission probabilities: a softmax over each state's row of its block (each
    row's total summed in float64)."""
    starts, lengths = _rows(blocks)
    out = logits - np.repeat(np.maximum.reduceat(logits, starts), lengths)
    np.exp(out, out=out)
    totals = np.add.reduceat(out, starts, dtype=np.float64).astype(out.dtype)
    out /= np.repeat(totals, lengths)
    return out


def emission_gradient(counts: np.ndarray, probabilities: np.ndarray, blocks: Blocks) -> np.ndarray:
    """The gradient of the log evidence with respect to the flat emission logits (k V,):
    ``counts - (the row's total count) * probabilities`` on every state's row of its block,
    from the expected emission ``counts`` (k V,) and the emission ``probabilities`` (k V,)."""
    starts, lengths = _rows(blocks)
    totals = np.repeat(np.add.reduceat(counts, starts), lengths)
    return (counts - totals * probabilities).astype(probabilities.dtype)


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


class _Kind(Protocol):
    """How one parameterisation's transitions make a batch's blocks: ``setup`` the state a
    sub-model's batches share, ``blocks`` a batch's from it, ``gradient`` the transition
    parameters' from the batch's statistics."""

    @staticmethod
    def setup(t: Any, r: Restriction, work: Any) -> Any: ...

    @staticmethod
    def blocks(
        state: Any, coded: blocked.Coded, k: int
    ) -> blocked.DenseBlocks | blocked.LowRankBlocks: ...

    @staticmethod
    def gradient(
        t: Any, state: Any, blocks: Any, s: blocked.Statistics, r: Any, work: Any
    ) -> Transition: ...


class _Softmax:
    """Dense blocks gathered from the softmax of the logits (n, n)."""

    @staticmethod
    def setup(t: Softmax, r: Restriction, work) -> np.ndarray:
        return softmax_in_place(t.logits)  # ``restrict`` made the logits a copy

    @staticmethod
    def blocks(T: np.ndarray, coded: blocked.Coded, k: int) -> blocked.DenseBlocks:
        slot = blocked.visited(coded, len(T) // k)
        a, b = np.nonzero(slot >= 0)
        C = slot.shape[0]
        return blocked.DenseBlocks(np.ascontiguousarray(T.reshape(C, k, C, k)[a, :, b, :]), slot)

    @staticmethod
    def gradient(t: Softmax, T, blocks, s: blocked.Statistics, r, work) -> Softmax:
        k, C = r.blocks.states, r.blocks.n_clusters
        G = blocked.block_gradient(s.transitions, blocks.slot, len(blocks.values))
        d = scratch(work, "d_transition", T.shape, T.dtype)
        d.fill(0)
        a, b = np.nonzero(blocks.slot >= 0)
        d.reshape(C, k, C, k)[a, :, b, :] = G
        d -= s.visits.astype(T.dtype)[:, None]
        d *= T
        return Softmax(d)


class _NeuralState(NamedTuple):
    h: neural.Hidden
    E: np.ndarray  # (n, d)
    log_z: np.ndarray  # (n,) the rows computed so far; NaN for the others


class _Neural:
    """Dense blocks of the neural softmax, the normalisers of the rows they need."""

    @staticmethod
    def setup(t: Neural, r: Restriction, work) -> _NeuralState:
        h = neural.hidden(t)
        return _NeuralState(h, t.E, np.full(len(t.E), np.nan, t.E.dtype))

    @staticmethod
    def blocks(state: _NeuralState, coded: blocked.Coded, k: int) -> blocked.DenseBlocks:
        slot = blocked.visited(coded, len(state.E) // k)
        sources = np.flatnonzero((slot >= 0).any(axis=1))
        rows = (sources[:, None] * k + np.arange(k)).ravel()
        missing = rows[np.isnan(state.log_z[rows])]
        if missing.size:
            state.log_z[missing] = neural.log_normalisers(state.h.H, state.E, missing)[missing]
        values = neural.dense_blocks(state.h.H, state.E, state.log_z, slot, k)
        return blocked.DenseBlocks(values, slot)

    @staticmethod
    def gradient(t: Neural, state: _NeuralState, blocks, s: blocked.Statistics, r, work):
        G = blocked.block_gradient(s.transitions, blocks.slot, len(blocks.values))
        G *= blocks.values  # with respect to the logits: T_ij G_ij on the blocks
        H, E = state.h.H, state.E
        dH, dE = neural.block_gradient(H, E, G, blocks.slot)
        log_z = np.where(s.visits > 0, state.log_z, 0)
        normaliser_h, normaliser_e = neural.normaliser_gradient(H, E, log_z, s.visits)
        return neural.mlp_gradient(t, state.h, dH + normaliser_h, dE + normaliser_e)


class _Kernel:
    """Low-rank blocks of the kernel (``pipeline.hmmlm.blocked_kernel``)."""

    @staticmethod
    def setup(t: Kernel, r: Restriction, work) -> blocked_kernel.KernelBlocks:
        return blocked_kernel.kernel_blocks(t, r.indptr, r.indices, work)

    @staticmethod
    def blocks(parts, coded, k: int) -> blocked.LowRankBlocks:
        return parts.T

    @staticmethod
    def gradient(t: Kernel, parts, blocks, s: blocked.Statistics, r, work) -> Kernel:
        return blocked_kernel.gradient(t, parts, s, r.blocks.states, work)


_KINDS: dict[type, type[_Kind]] = {Softmax: _Softmax, Neural: _Neural, Kernel: _Kernel}


def carry_in(carry: np.ndarray | None, previous: np.ndarray, r: Restriction):
    """The carried beliefs (B, k) over every state of the clusters ``previous`` (B,) (the
    previous tokens') as beliefs over the sub-model's kept states (B, k'), renormalised
    (uniform where none of the kept states had any); None stays None."""
    if carry is None or r.kept.shape[1] == carry.shape[1]:
        return carry
    kept = np.take_along_axis(carry, r.kept[previous], axis=1)
    total = kept.sum(axis=1, keepdims=True)
    safe = np.where(total > 0, total, 1)
    return np.where(total > 0, kept / safe, 1 / kept.shape[1]).astype(carry.dtype)


def carry_out(last: np.ndarray, clusters: np.ndarray, r: Restriction, k: int) -> np.ndarray:
    """The sub-model's last beliefs (B, k') at tokens of the clusters ``clusters`` (B,) as
    beliefs over all k states of each (B, k), zero for the dropped states."""
    if r.kept.shape[1] == k:
        return last
    out = np.zeros((len(last), k), last.dtype)
    np.put_along_axis(out, r.kept[clusters], last, axis=1)
    return out


def _with_previous(tokens: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
    """``tokens`` (B, T) after the previous segment's last tokens (B,), if any."""
    return tokens if previous is None else np.concatenate([previous[:, None], tokens], axis=1)


def batch_gradient(
    p: Parameters,
    blocks: Blocks,
    tokens: np.ndarray,
    r: Restriction,
    work: Workspace | None = None,
    *,
    carry: np.ndarray | None = None,
    previous: np.ndarray | None = None,
):
    """``(log evidence, gradient, last beliefs)`` of the batch ``tokens`` (B, T) under the
    sub-model ``r`` of ``p`` (``full`` for the whole model); the gradient is the full
    model's. With ``carry`` (B, k) the sequences continue from the beliefs over all k
    states of the clusters of the tokens ``previous`` (B,) (the last of the segment
    before); the last beliefs (B, k) are the next segment's carry. With ``work``, large
    gradients live in its buffers until the next call."""
    k = blocks.states
    sub = restrict(p, r, work)
    prior = softmax_rows(sub.prior)
    emission = emission_probabilities(sub.emission, r.blocks)
    coded = blocked.code(_with_previous(tokens, previous), blocks)
    kind = _KINDS[type(sub.transition)]
    state = kind.setup(sub.transition, r, work)
    T = kind.blocks(state, coded, r.blocks.states)
    start = None if carry is None else carry_in(carry, coded.cluster[:, 0], r)
    s = blocked.statistics(prior, emission, r.blocks, T, coded, start)
    d_transition = kind.gradient(sub.transition, state, T, s, r, work)
    d_emission = emission_gradient(s.emission_counts, emission, r.blocks)
    starts = 0 if carry is not None else len(tokens)
    grad = Parameters(
        (s.posterior_start - starts * prior).astype(sub.prior.dtype),
        d_emission,
        d_transition,
    )
    last = carry_out(s.last, coded.cluster[:, -1], r, k)
    return s.log_evidence, expand(grad, r, p, work), last


def log_evidence(
    p: Parameters, blocks: Blocks, streams: np.ndarray, length: int = 256, work=None
) -> float:
    """``sum log P(stream)`` over the rows of ``streams`` (S, L) under the whole model, each
    from the prior, in segments of ``length`` tokens with the state carried between them."""
    r = full(blocks, p.transition.band.shape[1] if isinstance(p.transition, Kernel) else 0)
    sub = restrict(p, r, work)
    prior = softmax_rows(sub.prior)
    emission = emission_probabilities(sub.emission, r.blocks)
    kind = _KINDS[type(sub.transition)]
    state = kind.setup(sub.transition, r, work)
    total, carry, previous = 0.0, None, None
    for lo in range(0, streams.shape[1], length):
        segment = streams[:, lo : lo + length]
        coded = blocked.code(_with_previous(segment, previous), blocks)
        T = kind.blocks(state, coded, blocks.states)
        evidence, carry = blocked.log_evidence(prior, emission, blocks, T, coded, carry)
        total, previous = total + evidence, segment[:, -1]
    return total
