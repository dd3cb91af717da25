"""The backward step of every matrix layout, and the backward recursion of smoothing.

The forward step is a product with ``T.T`` (``belief @ T``: each stored entry scatters into
its column); the backward step is a product with ``T`` (``T @ message``: each row gathers
the entries of the message its stored entries point to), so it reads the same layouts
(``pipeline.kernels.forward``: ``Dense``, ``CsrRows``, ``CsrEntries``, ``CsrPanel``,
``Structured``, ``LowRank``) in the other direction: eight dense rows' dot products at a
time, one pass over the stored entries row by row for CSR (no conflicting writes:
each row writes its own output), the panel's columns by BLAS, a rank-one or low-rank
correction by two thin products. ``retreat`` and ``retreat_block`` are resolved per
layout class when a recursion compiles (``numba.extending.overload``), as
``pipeline.kernels.forward.advance`` is.

``backward`` runs the backward half of forward-backward smoothing over a segment of steps
whose filtered beliefs the forward recursion (``pipeline.kernels.forward.forward``) wrote;
it turns them into posteriors in place or into another array, and hands the next (earlier)
segment its message, so a horizon can be smoothed segment by segment from checkpoints.

Every step and the recursion that inlines them live in this one module (and import only
the layout classes, plain named tuples, from ``forward``): numba's cache checks only the
source file of a cached function, as ``pipeline.kernels.forward`` explains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np
from numba import types
from numba.extending import overload

from pipeline.kernels.forward import CsrEntries, CsrPanel, CsrRows, Dense, LowRank, Structured

if TYPE_CHECKING:
    from pipeline.kernels import JitOptions

JIT: JitOptions = {"cache": True, "nogil": True}


def _is(layout, cls) -> bool:
    """Whether the numba type ``layout`` is the named tuple class ``cls``."""
    return (
        isinstance(layout, (types.NamedTuple, types.NamedUniTuple)) and layout.instance_class is cls
    )


def retreat(layout, message, out):
    """``out = T @ message`` for the matrix of ``layout`` (compiled code only)."""
    raise NotImplementedError("retreat runs inside compiled code")


def retreat_block(layout, block, out):
    """``out = T @ block`` for a state-major block (m, B) into (n, B) (compiled code only)."""
    raise NotImplementedError("retreat_block runs inside compiled code")


# --- the steps -----------------------------------------------------------------------------


@numba.njit(**JIT)
def _gather_rows(indptr, indices, data, message, out):
    """``out = S @ message`` for CSR ``S``: each row sums its stored entries times the
    message at their columns, in the order they are stored."""
    for i in range(out.size):
        total = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            total += data[k] * message[np.uintp(indices[k])]
        out[i] = total


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _gather_dense(T, message, out):
    """``out = T @ message`` for a dense ``T`` (n, m), eight rows at a time: each entry of the
    message is loaded once for eight dot products, whose sums may be reassociated (so
    vectorised). Faster than BLAS's matrix-vector product in this direction where the
    matrix is larger than the caches, and as fast within them (``docs/benchmarks.md``)."""
    n, m = T.shape
    i = 0
    while i + 7 < n:
        rows = T[i : i + 8]
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
        for j in range(m):
            value = message[j]
            s0 += rows[0, j] * value
            s1 += rows[1, j] * value
            s2 += rows[2, j] * value
            s3 += rows[3, j] * value
            s4 += rows[4, j] * value
            s5 += rows[5, j] * value
            s6 += rows[6, j] * value
            s7 += rows[7, j] * value
        out[i], out[i + 1], out[i + 2], out[i + 3] = s0, s1, s2, s3
        out[i + 4], out[i + 5], out[i + 6], out[i + 7] = s4, s5, s6, s7
        i += 8
    for last in range(i, n):
        row, total = T[last], 0.0
        for j in range(m):
            total += row[j] * message[j]
        out[last] = total


@numba.njit(**JIT)
def _gather_rows_block(indptr, indices, data, block, out):
    """``out = S @ block`` for CSR ``S`` and a state-major block (m, B) into (n, B)."""
    out[:, :] = 0.0
    width = block.shape[1]
    for i in range(out.shape[0]):
        for k in range(indptr[i], indptr[i + 1]):
            j, value = np.uintp(indices[k]), data[k]
            for b in range(width):
                out[i, b] += value * block[j, b]


@numba.njit(**JIT)
def _add_panel(columns, panel, message, out):
    """``out += panel.T @ message[columns]``: the dense columns of a ``CsrPanel`` (h, n)."""
    out += np.dot(message[columns], panel)


@numba.njit(**JIT)
def _add_panel_block(columns, panel, block, out):
    """``out += panel.T @ block[columns]`` for a state-major block."""
    out += np.dot(panel.T, block[columns])


@overload(retreat, jit_options=JIT)
def _retreat_dense(layout, message, out):
    if _is(layout, Dense):
        return lambda layout, message, out: _gather_dense(layout.T, message, out)
    return None


@overload(retreat, jit_options=JIT)
def _retreat_csr(layout, message, out):
    if _is(layout, CsrRows) or _is(layout, CsrEntries):
        return lambda layout, message, out: _gather_rows(
            layout.indptr, layout.indices, layout.data, message, out
        )
    return None


@overload(retreat, jit_options=JIT)
def _retreat_csr_panel(layout, message, out):
    if _is(layout, CsrPanel):

        def step(layout, message, out):
            retreat(layout.rest, message, out)
            _add_panel(layout.columns, layout.panel, message, out)

        return step
    return None


@overload(retreat, jit_options=JIT)
def _retreat_structured(layout, message, out):
    if _is(layout, Structured):

        def step(layout, message, out):
            retreat(layout.sparse, message, out)
            out += np.dot(layout.v, message) * layout.u

        return step
    return None


@overload(retreat, jit_options=JIT)
def _retreat_low_rank(layout, message, out):
    if _is(layout, LowRank):

        def step(layout, message, out):
            retreat(layout.correction, message, out)
            out += np.dot(layout.left, np.dot(message, layout.right))

        return step
    return None


@overload(retreat_block, jit_options=JIT)
def _retreat_block_dense(layout, block, out):
    if _is(layout, Dense):
        return lambda layout, block, out: np.dot(layout.T, block, out)
    return None


@overload(retreat_block, jit_options=JIT)
def _retreat_block_csr(layout, block, out):
    if _is(layout, CsrRows) or _is(layout, CsrEntries):
        return lambda layout, block, out: _gather_rows_block(
            layout.indptr, layout.indices, layout.data, block, out
        )
    return None


@overload(retreat_block, jit_options=JIT)
def _retreat_block_csr_panel(layout, block, out):
    if _is(layout, CsrPanel):

        def step(layout, block, out):
            retreat_block(layout.rest, block, out)
            _add_panel_block(layout.columns, layout.panel, block, out)

        return step
    return None


@overload(retreat_block, jit_options=JIT)
def _retreat_block_structured(layout, block, out):
    if _is(layout, Structured):

        def step(layout, block, out):
            retreat_block(layout.sparse, block, out)
            out += np.outer(layout.u, np.dot(layout.v, block))

        return step
    return None


@overload(retreat_block, jit_options=JIT)
def _retreat_block_low_rank(layout, block, out):
    if _is(layout, LowRank):

        def step(layout, block, out):
            retreat_block(layout.correction, block, out)
            out += np.dot(layout.left, np.dot(layout.right.T, block))

        return step
    return None


@numba.njit(**JIT)
def step(layout, message, out):
    """``out = T @ message`` (n,) for the matrix of ``layout``: one backward step, as the
    recursion takes it, callable from Python."""
    retreat(layout, message, out)


@numba.njit(**JIT)
def step_block(layout, block, out):
    """``out = T @ block`` for a state-major block (m, B) into (n, B): one backward block
    step, callable from Python."""
    retreat_block(layout, block, out)


# --- the recursion -------------------------------------------------------------------------


@numba.njit(**JIT)
def _weigh(message, likelihoods, row):
    """``message <- message * likelihoods[row]`` divided by its largest entry (left as it is
    when that is zero); nothing for ``row = -1`` (nothing that counts as observed): the
    message is then a ``beta`` whose largest entry is already 1."""
    if row < 0:
        return
    top = 0.0
    for i in range(message.size):
        message[i] = message[i] * likelihoods[row, i]
        top = max(top, message[i])
    if top > 0.0:
        for i in range(message.size):
            message[i] /= top


@numba.njit(**JIT)
def backward(layout, likelihoods, rows, zero, alphas, posteriors, message, last, after):
    """The backward recursion over one segment of T' steps, from its last step to its first.

    Parameters
    ----------
    layout : the transition matrix as a layout of ``pipeline.kernels.forward``.
    likelihoods : (k, n) ``P(o | S)`` (each row scaled by a constant) of each distinct row.
    rows : (T',) int, the row of ``likelihoods`` observed at each step of the segment, or -1.
    zero : (T',) bool, the steps the forward recursion found impossible: they count as
        unobserved here too, as they did there.
    alphas : (T', n) the filtered beliefs ``P(S_t | o_0..o_t)`` of the segment's steps.
    posteriors : (T', n) output, ``P(S_t | o_0..o_{T-1})``; may be ``alphas`` itself (each
        step overwrites its own belief once it has been read).
    message : (n,) in and out. In: ``w_e``, the weighted backward message of the step
        after the segment (ignored when ``last``). Out: ``w_s`` of the segment's first step,
        for the segment before it. ``w_t = P(o_t | S_t) beta_t`` divided by its largest
        entry, where ``beta_t`` is proportional to ``P(o_{t+1}..o_{T-1} | S_t)``.
    last : bool, the segment ends the horizon (``beta = 1`` at its last step).
    after : (T', n) output, or (0, n) for none: ``after[t] = w_{t+1} / Z_t`` with
        ``Z_t = alpha_t . (T @ w_{t+1})``, so that ``P(S_t = i, S_{t+1} = j | o) =
        alphas[t, i] * T[i, j] * after[t, j]`` (zero at the last step of the horizon).

    After its product a step makes two passes over the states (``Z_t`` and the largest
    entry; then the posterior, the counts' factor and the next ``beta``), and an observed
    step two more (``beta`` times the likelihoods, then divided by their largest entry).
    """
    steps, n = alphas.shape
    gathered = np.empty(n)
    counts = after.shape[0] > 0
    for t in range(steps - 1, -1, -1):
        alpha = alphas[t]
        row = -1 if zero[t] else rows[t]
        if t == steps - 1 and last:
            posteriors[t] = alpha
            if counts:
                after[t] = 0.0
            message[:] = 1.0  # beta
            _weigh(message, likelihoods, row)
            continue
        retreat(layout, message, gathered)
        total, top = 0.0, 0.0
        for i in range(n):
            total += alpha[i] * gathered[i]
            top = max(top, gathered[i])
        for i in range(n):
            if total > 0.0:
                posteriors[t, i] = alpha[i] * gathered[i] / total
            else:  # the messages underflowed: the filtered belief is what is left
                posteriors[t, i] = alpha[i]
            if counts:
                after[t, i] = message[i] / total if total > 0.0 else 0.0
            message[i] = gathered[i] / top if top > 0.0 else 1.0  # beta
        _weigh(message, likelihoods, row)


@numba.njit(**JIT)
def entry_sums(indptr, indices, before, after, out):
    """``out[k] = sum_t before[i, t] after[j, t]`` for each stored entry ``k`` at ``(i, j)``
    of a CSR matrix: ``before`` (n, T') and ``after`` (m, T'), state-major, so each sum
    reads two contiguous rows."""
    for i in range(indptr.size - 1):
        left = before[i]
        for k in range(indptr[i], indptr[i + 1]):
            right = after[np.uintp(indices[k])]
            total = 0.0
            for t in range(left.size):
                total += left[t] * right[t]
            out[k] = total
