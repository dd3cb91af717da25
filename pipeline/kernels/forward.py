"""The compiled forward recursion and the step of each matrix layout.

``forward`` (one sequence) and ``forward_block`` (B sequences as one block: member-major
(B, n) for a dense matrix, state-major (n, B) for the others) run the whole horizon in one
compiled loop, so no format pays
per-step Python overhead and a speedup measures the method, not the
interpreter. They take the matrix as a layout, a ``NamedTuple`` of arrays whose
class says how a step reads it: ``Dense`` (a compiled matrix-vector product in BLAS's order
of sums, BLAS itself for a small matrix, or the rows of the non-zero states when they are
few), ``CsrRows`` and ``CsrEntries`` (scatter
the stored entries row by row, or in one flat loop for short rows; a batch of
long rows in tiles of its output that stay in cache), ``CsrPanel`` (a CSR layout of the
sparse columns plus a dense panel of the columns that are mostly full, stepped by BLAS),
``Structured`` (a CSR layout plus a rank-one update) and ``LowRank`` (two thin
BLAS products plus a sparse correction). ``advance`` and
``advance_block`` are resolved per layout class when the recursion compiles
(``numba.extending.overload``), so each layout gets its own compiled loop and
a new layout is one class and its two overloads here, and its overloads of the backward
and max-product steps (``pipeline.kernels.backward``, ``pipeline.kernels.maxproduct``),
which read the same layouts. Each step reads the
monotonic clock to record the cumulative runtime. Belief pruning (keep the top-p states
after every step) runs inside the loop.

The loops read their layouts without bounds checks (numba's default): a layout is made only
from a matrix ``pipeline.operators`` admitted, whose every index was checked against its
shape (``pipeline.operators.check_structure``), never from raw arrays.

The layouts, their steps and the recursions stay in this one module, longer than the
package's others: numba's cache checks only the source file of the cached function, so a
step moved to another file could be edited while a stale compiled recursion that inlined
it still loads from the cache.

Its namesakes: ``pipeline.inference.forward`` (prediction and filtering over any format,
checked, which calls these kernels) and ``pipeline.kinds.methods.modes.forward`` (the
methods sweep's forward modes); all three are the forward recursion, at three layers.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from pipeline.kernels.select import prune

if TYPE_CHECKING:
    from pipeline.kernels import JitOptions

JIT: JitOptions = {"cache": True, "nogil": True}

# Start numba's threading layer on import: the cached recursions call the parallel CSR step,
# whose runtime symbols the layer registers when it starts, and a process that loads them from
# the cache before anything has started the layer crashes.
numba.get_num_threads()

_clock_gettime = types.ExternalFunction("clock_gettime", types.int32(types.int32, types.voidptr))
_MONOTONIC = time.CLOCK_MONOTONIC


@numba.njit(**JIT)
def monotonic(buffer):
    """``time.monotonic()`` inside compiled code; ``buffer`` is int64 scratch of length 2."""
    # numba's stubs type an external function as a numba type, not as what compiled code calls
    _clock_gettime(_MONOTONIC, buffer.ctypes)  # type: ignore[call-overload]
    return buffer[0] + 1e-9 * buffer[1]


@numba.njit(**JIT)
def _non_zero(belief):
    """How many entries of ``belief`` are non-zero."""
    count = 0
    for i in range(belief.size):
        count += belief[i] != 0.0
    return count


# --- the layouts ------------------------------------------------------------------------


class Dense(NamedTuple):
    """A dense matrix ``T`` (n, m)."""

    T: np.ndarray


class CsrRows(NamedTuple):
    """A CSR matrix ``S`` (n, m), stepped row by row, skipping the rows of zero states."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray


class CsrEntries(NamedTuple):
    """A CSR matrix with short rows: ``entry_rows[k]`` is the row of entry ``k``, so a
    mostly non-zero belief steps in one flat loop over the entries."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    entry_rows: np.ndarray


class CsrPanel(NamedTuple):
    """A CSR matrix (n, m) split by columns: ``panel`` (h, n), C-contiguous, holds the
    columns ``columns`` (h,) in full, zeros included (``panel[c]`` is column ``columns[c]``);
    ``rest`` the entries of the other columns as a CSR layout over all m columns."""

    rest: CsrRows | CsrEntries
    columns: np.ndarray
    panel: np.ndarray


@numba.njit(**JIT)
def split_columns(indptr, indices, data, where, panel):
    """The arrays of a ``CsrPanel`` from canonical CSR arrays (n rows): ``where[j]`` is the
    row of ``panel`` (h, n), zero-filled, that takes column ``j``, or -1 for a column of the
    rest. Fills ``panel`` and returns the rest's ``indptr``, ``indices`` and ``data``."""
    n = indptr.size - 1
    rest_indptr = np.zeros(n + 1, indptr.dtype)
    for i in range(n):
        kept = 0
        for k in range(indptr[i], indptr[i + 1]):
            kept += where[indices[k]] < 0
        rest_indptr[i + 1] = rest_indptr[i] + kept
    rest_indices = np.empty(rest_indptr[n], indices.dtype)
    rest_data = np.empty(rest_indptr[n])
    for i in range(n):
        position = rest_indptr[i]
        for k in range(indptr[i], indptr[i + 1]):
            c = where[indices[k]]
            if c < 0:
                rest_indices[position], rest_data[position] = indices[k], data[k]
                position += 1
            else:
                panel[c, i] = data[k]
    return rest_indptr, rest_indices, rest_data


class Structured(NamedTuple):
    """``S + outer(u, v)``: a CSR layout of ``S`` and the factors ``u`` (n,) and ``v`` (m,)."""

    sparse: CsrRows | CsrEntries | CsrPanel
    u: np.ndarray
    v: np.ndarray


class LowRank(NamedTuple):
    """``left @ right.T`` plus a sparse ``correction`` (the band's entries minus the
    product there): ``left`` (n, F), ``right`` (m, F); ``band`` the band's own entries,
    which the max-product step (``pipeline.kernels.maxproduct``) sets in generated rows."""

    correction: CsrRows | CsrEntries | CsrPanel
    left: np.ndarray
    right: np.ndarray
    band: CsrRows


def _is(layout, cls) -> bool:
    """Whether the numba type ``layout`` is the named tuple class ``cls``."""
    return (
        isinstance(layout, (types.NamedTuple, types.NamedUniTuple)) and layout.instance_class is cls
    )


def advance(layout, belief, out, threads):
    """``out = belief @ T`` for the matrix of ``layout``, on up to ``threads`` threads
    (compiled code only)."""
    raise NotImplementedError("advance runs inside compiled code")


def advance_block(layout, block, out):
    """The block step of B distributions at once (compiled code only): ``out = block @ T``
    for a member-major block (B, n) where the layout takes one (``members_first``), else
    ``out = T^T @ block`` for a state-major block (n, B)."""
    raise NotImplementedError("advance_block runs inside compiled code")


def members_first(layout) -> bool:
    """Whether a block of ``layout`` is member-major, (B, n), each distribution a contiguous
    row: a dense matrix's, which BLAS multiplies fastest as a row-major batch times ``T``,
    the layout of numpy's ``(B, n) @ T`` (``python benchmarks/inference.py batch``,
    ``docs/benchmarks.md``). The sparse and factored layouts take state-major blocks (n, B),
    whose rows hold each state's B values side by side for their scatters and gathers."""
    return isinstance(layout, Dense)


def _members_first(layout):
    """``members_first`` inside compiled code, a constant of each layout type."""
    raise NotImplementedError("_members_first runs inside compiled code")


@overload(_members_first, jit_options=JIT)
def _members_first_of(layout):
    members = _is(layout, Dense)
    return lambda layout: members


# --- the steps -----------------------------------------------------------------------------


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` rounded once (LLVM's ``llvm.fma``), in compiled code: a fused step of a
    sum whose order must be kept, which numba's plain arithmetic never fuses."""

    def codegen(context, builder, signature, args):
        double = ir.DoubleType()
        fused = builder.module.declare_intrinsic(
            "llvm.fma", [double], ir.FunctionType(double, [double, double, double])
        )
        return builder.call(fused, args)

    return types.float64(types.float64, types.float64, types.float64), codegen


@numba.njit(**JIT)
def _four_rows(T, i, belief, j):
    """``belief[i:i+4] @ T[i:i+4, j]``, summed as BLAS's kernel sums four rows (below)."""
    # numba's stubs count the typing context among an intrinsic's arguments
    first: float = _fma(T[i, j], belief[i], T[i + 1, j] * belief[i + 1])  # type: ignore[call-arg]
    second: float = _fma(T[i + 2, j], belief[i + 2], first)  # type: ignore[call-arg]
    return _fma(T[i + 3, j], belief[i + 3], second)  # type: ignore[call-arg]


DENSE_ROWS = 16
"""The rows of ``T`` that ``_vector_matrix`` adds into the output in one pass over it (four
of its four-row groups), read as that many streams at once; half as many where the rows lie
a multiple of ``CACHE_ALIASING`` bytes apart."""
CACHE_ALIASING = 4096
"""Rows this many bytes apart (or a multiple) fall in the same set of a core's L1 cache,
which holds eight lines a set here: sixteen such rows read side by side evict each other."""


@numba.njit(**JIT)
def _vector_matrix(T, belief, out):
    """``out = belief @ T`` for a dense ``T`` (n, m), each output summed in the order of
    OpenBLAS's ``dgemv_n`` on AVX-512 machines with one thread (the call smaller steps make,
    ``DENSE_BLAS``), so the two give the same numbers to the last bit there.

    That order, for column ``j`` among the first ``m - m % 4``: the rows in groups of four,
    each group's sum ``fma(T[i+3], b[i+3], fma(T[i+2], b[i+2], fma(T[i], b[i], T[i+1] b[i+1])))``
    added to the column's total in turn; two rows left over are one more
    ``fma(T[i], b[i], T[i+1] b[i+1])``, a last single row ``T[i] b[i]``, each added likewise.
    The last ``m % 4`` columns: one fused sum down each column. BLAS adds each group into
    the whole output, a pass over it every four rows; here a pass adds ``DENSE_ROWS`` rows
    (or eight), whose reads stream in side by side.
    """
    n, m = T.shape
    wide = m - m % 4
    out[:wide] = 0.0
    i = 0
    if T.strides[0] % CACHE_ALIASING:
        while i + DENSE_ROWS <= n:
            for j in range(wide):
                total = out[j] + _four_rows(T, i, belief, j)
                total = total + _four_rows(T, i + 4, belief, j)
                total = total + _four_rows(T, i + 8, belief, j)
                out[j] = total + _four_rows(T, i + 12, belief, j)
            i += DENSE_ROWS
    while i + 8 <= n:
        for j in range(wide):
            out[j] = (out[j] + _four_rows(T, i, belief, j)) + _four_rows(T, i + 4, belief, j)
        i += 8
    if i + 4 <= n:
        for j in range(wide):
            out[j] += _four_rows(T, i, belief, j)
        i += 4
    if i + 2 <= n:
        for j in range(wide):
            out[j] += _fma(T[i, j], belief[i], T[i + 1, j] * belief[i + 1])  # type: ignore[call-arg]
        i += 2
    if i < n:
        for j in range(wide):
            out[j] += T[i, j] * belief[i]
    for j in range(wide, m):
        total = 0.0
        for k in range(n):
            total = _fma(T[k, j], belief[k], total)  # type: ignore[call-arg]
        out[j] = total


DENSE_BLAS = 2**17
"""A dense step over a matrix of fewer entries than this (1 MiB, a core's L2 cache on this
machine), or of fewer than four columns, is BLAS's ``belief @ T``: while the matrix stays in
that cache, BLAS's own loop is the faster of the two (``docs/benchmarks.md``)."""


@numba.njit(**JIT)
def _dense_step(T, belief, out):
    """``_vector_matrix`` (BLAS for a small matrix, ``DENSE_BLAS``), or only the rows of the
    non-zero states when fewer than two thirds are (after pruning, or from a peaked prior).

    Both stream the matrix at the same rate (measured at n = 800 to 4000: a
    quarter of the rows 2.8-3.2x faster than BLAS, half 1.4-1.6x, three
    quarters 1.0-1.1x, 90% 0.9x).
    """
    if 3 * _non_zero(belief) >= 2 * belief.size:
        if T.size < DENSE_BLAS or T.shape[1] < 4:
            np.dot(belief, T, out)
        else:
            _vector_matrix(T, belief, out)
        return
    out[:] = 0.0
    for i in range(belief.size):
        weight = belief[i]
        if weight != 0.0:
            row = T[i]
            for j in range(out.size):
                out[j] += weight * row[j]


@numba.njit(**JIT)
def _scatter_rows(indptr, indices, data, belief, out):
    """``out = belief @ S`` for CSR ``S``: scatter each non-zero state's row.

    Each row is read through slices of ``indices`` and ``data``, in a plain loop
    with column indices read as unsigned (numba then skips its negative-index
    wraparound). Measured against scipy's ``belief @ S`` (one thread, random
    dense belief): 28 against 31 ms for the LM's top-0.9 rows (6,500 entries
    each), 13 against 15 ms at top-0.5, 75 against 101 us for Bell's 5 per row;
    the loop over ``indptr`` positions with four entries loaded at a time, used
    before, took 36, 17 and 92.
    """
    out[:] = 0.0
    for i in range(belief.size):
        weight = belief[i]
        if weight == 0.0:
            continue
        columns = indices[indptr[i] : indptr[i + 1]]
        values = data[indptr[i] : indptr[i + 1]]
        for k in range(columns.size):
            out[np.uintp(columns[k])] += weight * values[k]


@numba.njit(**JIT)
def _scatter_entries(indptr, indices, data, entry_rows, belief, out):
    """``out = belief @ S`` as one flat loop over the entries when at least half the
    states are non-zero, else row by row.

    With short rows (a few entries each) the flat loop beats the loop over rows,
    whose per-row work costs as much as the rows' entries (1.1 against 1.3 to 2
    ns per entry at 5 entries per row).
    """
    if 2 * _non_zero(belief) < belief.size:
        _scatter_rows(indptr, indices, data, belief, out)
        return
    out[:] = 0.0
    for k in range(data.size):
        out[np.uintp(indices[k])] += data[k] * belief[np.uintp(entry_rows[k])]


PREFETCH_STATES = 2**18
"""A CSR step whose output has at least this many states (2 MiB, four times a core's L2
cache on this VM) asks for each entry's output line ``PREFETCH_DISTANCE`` entries before it
adds to it (``_scatter_far``): out of cache a scatter waits on memory, and its reads of the
output are otherwise issued only when the entry is reached. Below it the hint costs more
than it saves; ``benchmarks/far_scatter.py`` measures both sides of the threshold
(docs/benchmarks.md)."""
PREFETCH_DISTANCE = 64


@intrinsic
def _prefetch(typingctx, array, index):
    """Ask the CPU to bring the cache line of ``array[index]`` in for writing (LLVM's
    ``llvm.prefetch``): a hint, which changes no value and no fault can come of."""

    def codegen(context, builder, signature, args):
        kind = signature.args[0]
        where = cgutils.get_item_pointer(
            context,
            builder,
            kind,
            context.make_array(kind)(context, builder, args[0]),
            [args[1]],
            wraparound=False,
            boundscheck=False,
        )
        byte, word = ir.IntType(8).as_pointer(), ir.IntType(32)
        hint = builder.module.declare_intrinsic(
            "llvm.prefetch", [byte], ir.FunctionType(ir.VoidType(), [byte, word, word, word])
        )
        # write, keep in every cache level, a data (not instruction) line
        builder.call(hint, [builder.bitcast(where, byte), word(1), word(3), word(1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


@numba.njit(**JIT)
def _scatter_far(indptr, indices, data, belief, out):
    """``out = belief @ S`` for an output larger than the caches (``PREFETCH_STATES``): row
    by row, each entry's output line asked for ``PREFETCH_DISTANCE`` entries ahead. Every
    output sums the same products in the same order as ``_scatter_rows`` and
    ``_scatter_entries``: the same numbers to the last bit."""
    out[:] = 0.0
    last = data.size - 1
    for i in range(belief.size):
        weight = belief[i]
        if weight == 0.0:
            continue
        for k in range(indptr[i], indptr[i + 1]):
            # numba's stubs count the typing context among an intrinsic's arguments
            _prefetch(out, np.uintp(indices[min(k + PREFETCH_DISTANCE, last)]))  # type: ignore[call-arg]
            out[np.uintp(indices[k])] += weight * data[k]


PARALLEL_ENTRIES = 50_000
"""A CSR step over at least this many stored entries, and at least ``PARALLEL_DEPTH`` per
column, from a belief at least half non-zero, uses the caller's numba threads
(``numba.set_num_threads``); other steps stay on one thread. Measured on 2 cores against
one thread: 1.34x for the maximum-likelihood LM's top-0.9 rows (111,000 entries, 15 per
column), 1.14x at the smoothed LM's top-0.5 (23 million) and 0.93x at its top-0.9 (50
million: one core already reads as fast as two here) scattered whole (their layouts now
keep the mostly full columns as a ``CsrPanel``), and 0.60x for Bell 20,000 (100,000
entries, 5 per column: zeroing and summing the threads' copies of the output costs more
than the scatter saves)."""
PARALLEL_DEPTH = 10


def step_threads(layout) -> int:
    """The threads ``forward`` may give a step of ``layout``: numba's setting
    (``numba.get_num_threads()``, about 1 us to read) when its CSR part is large enough for the
    parallel step (``PARALLEL_ENTRIES``), else 1.

    A ``CsrPanel`` scatters its rest on one thread: BLAS steps its panel on BLAS's threads,
    which numba's OpenMP threads, spinning after a parallel region, would slow (measured on
    the smoothed LM's top-0.9 rows: 16.0 ms a step with both on 2 threads, 9.0 with the
    scatter on one and BLAS on two, 12.6 with both on one)."""
    if isinstance(layout, Structured):
        layout = layout.sparse
    elif isinstance(layout, LowRank):
        layout = layout.correction
    if isinstance(layout, CsrRows | CsrEntries) and layout.data.size >= PARALLEL_ENTRIES:
        return numba.get_num_threads()
    return 1


@numba.njit(parallel=True, cache=True, nogil=True)
def _scatter_parallel(indptr, indices, data, belief, out, threads):
    """``out = belief @ S`` on ``threads`` threads: each scatters a share of the rows (equal
    shares of the entries) into its own copy of ``out``, then the copies are summed; from
    ``PREFETCH_STATES`` states on each entry's output line is asked for ahead, as in
    ``_scatter_far``."""
    n, m = belief.size, out.size
    total = indptr[n]
    bounds = np.empty(threads + 1, np.int64)
    for t in range(threads + 1):
        bounds[t] = np.searchsorted(indptr, total * t // threads)
    bounds[threads] = n
    partial = np.zeros((threads, m))
    far, last = m >= PREFETCH_STATES, total - 1
    for t in numba.prange(threads):
        copy = partial[t]
        for i in range(bounds[t], bounds[t + 1]):
            weight = belief[i]
            if weight == 0.0:
                continue
            for k in range(indptr[i], indptr[i + 1]):
                if far:
                    _prefetch(copy, np.uintp(indices[min(k + PREFETCH_DISTANCE, last)]))  # type: ignore[call-arg]
                copy[np.uintp(indices[k])] += weight * data[k]
    for j in numba.prange(m):
        value = 0.0
        for t in range(threads):
            value += partial[t, j]
        out[j] = value


@numba.njit(**JIT)
def _scatter(indptr, indices, data, entry_rows, belief, out, threads):
    """The CSR step: on ``threads`` threads for a large, deep step from a mostly non-zero
    belief (``PARALLEL_ENTRIES``, ``PARALLEL_DEPTH``), else with prefetching for an output
    larger than the caches (``PREFETCH_STATES``), else row by row, or over the entries
    for short rows (``entry_rows`` non-empty); an empty matrix (a low-rank fit without a
    band) only zeroes ``out``, rather than visit its n empty rows (2-3 us at n = 1000)."""
    if data.size == 0:
        out[:] = 0.0
    elif (
        threads > 1
        and data.size >= max(PARALLEL_ENTRIES, PARALLEL_DEPTH * out.size)
        and 2 * _non_zero(belief) >= belief.size
    ):
        _scatter_parallel(indptr, indices, data, belief, out, threads)
    elif out.size >= PREFETCH_STATES:
        _scatter_far(indptr, indices, data, belief, out)
    elif entry_rows.size:
        _scatter_entries(indptr, indices, data, entry_rows, belief, out)
    else:
        _scatter_rows(indptr, indices, data, belief, out)


@numba.njit(**JIT)
def _add_rank_one(u, v, belief, out):
    """``out += (belief . u) v``: the rank-one part of ``belief @ (S + outer(u, v))``."""
    weight = 0.0
    for i in range(belief.size):
        weight += belief[i] * u[i]
    for j in range(out.size):
        out[j] += weight * v[j]


@numba.njit(**JIT)
def _csr_block(indptr, indices, data, block, out):
    """``out = S^T @ block`` for CSR ``S`` and a state-major block (n, B).

    Indexed in two dimensions rather than through a row view per entry: 67
    against 97 ms for the LM's top-0.5 rows and 16 members (scipy: 75 ms).
    """
    out[:, :] = 0.0
    if data.size == 0:
        return
    width = block.shape[1]
    for i in range(block.shape[0]):
        columns = indices[indptr[i] : indptr[i + 1]]
        values = data[indptr[i] : indptr[i + 1]]
        for k in range(columns.size):
            j, value = np.uintp(columns[k]), values[k]
            for b in range(width):
                out[j, b] += value * block[i, b]


BLOCK_TILE = 1 << 19
"""The block step of a CSR matrix with long rows (``CsrRows``) whose output exceeds twice
this many bytes writes it in tiles of this many bytes (``_csr_block_tiled``), so the output
rows every entry adds to stay in a core's L2 cache rather than L3; short rows keep the
untiled step (every tile re-reads the block's rows). What tiling gains, and which tile sizes
and shapes were tried, is measured in ``docs/benchmarks.md`` (part 1e)."""


@numba.njit(**JIT)
def _csr_block_tiled(indptr, indices, data, block, out, tile):
    """``_csr_block`` over ``tile`` output rows at a time: each pass zeroes its tile, then
    adds each row's entries from where the row stopped until one falls beyond the tile.

    Every entry is added once, into an output row already zeroed, and the last pass takes
    the rest, so the product holds for any order of the column indices; sorted ones (as
    ``pipeline.operators.csr`` keeps them) are what keep each pass inside its tile, and
    then each output entry sums its terms in the order of ``_csr_block``: the two agree
    exactly.
    """
    width = block.shape[1]
    position = indptr[:-1].copy()
    for start in range(0, out.shape[0], tile):
        stop = min(out.shape[0], start + tile)
        out[start:stop, :] = 0.0
        for i in range(block.shape[0]):
            k, end = position[i], indptr[i + 1]
            while k < end and indices[k] < stop:
                j, value = np.uintp(indices[k]), data[k]
                for b in range(width):
                    out[j, b] += value * block[i, b]
                k += 1
            position[i] = k


@numba.njit(**JIT)
def _csr_block_long(indptr, indices, data, block, out):
    """The block step of long rows: tiled when the output exceeds two tiles (``BLOCK_TILE``)."""
    if out.nbytes > 2 * BLOCK_TILE:
        _csr_block_tiled(indptr, indices, data, block, out, max(1, BLOCK_TILE // out.strides[0]))
    else:
        _csr_block(indptr, indices, data, block, out)


PANEL_GATHER = 16
"""A panel step from a belief with fewer than one state in this many non-zero reads only
those states' entries of each panel column; from a fuller belief, the whole panel by BLAS.
Measured on the smoothed LM's top-0.5 panel (3,309 columns of 7,620 states, one thread):
3.3 against 8.9 ms with 1/64 of the states non-zero, 6.2 against 8.4 at 1/32, 7.7 against 7.5
at 1/16, 9.3 against 6.4 at 1/8."""


@numba.njit(**JIT)
def _add_panel(columns, panel, belief, out):
    """``out[columns] += panel @ belief``: the dense columns of a ``CsrPanel`` step."""
    part = np.empty(columns.size)
    if PANEL_GATHER * _non_zero(belief) >= belief.size:
        np.dot(panel, belief, part)
    else:
        states = np.flatnonzero(belief)
        weights = belief[states]
        for c in range(columns.size):
            column, value = panel[c], 0.0
            for k in range(states.size):
                value += column[states[k]] * weights[k]
            part[c] = value
    for c in range(columns.size):
        out[np.uintp(columns[c])] += part[c]


@numba.njit(**JIT)
def _add_panel_block(columns, panel, block, out):
    """``out[columns] += panel @ block``: the dense columns of a ``CsrPanel`` block step."""
    part = np.dot(panel, block)
    width = block.shape[1]
    for c in range(columns.size):
        j = np.uintp(columns[c])
        for b in range(width):
            out[j, b] += part[c, b]


@numba.njit(**JIT)
def _add_rank_one_block(u, v, block, out):
    """``out += outer(v, u @ block)``: the rank-one part of a block step."""
    weights = u @ block
    for j in range(v.size):
        for b in range(weights.size):
            out[j, b] += v[j] * weights[b]


@overload(advance, jit_options=JIT)
def _advance_dense(layout, belief, out, threads):
    if _is(layout, Dense):
        return lambda layout, belief, out, threads: _dense_step(layout.T, belief, out)
    return None


@overload(advance, jit_options=JIT)
def _advance_csr_rows(layout, belief, out, threads):
    if _is(layout, CsrRows):
        return lambda layout, belief, out, threads: _scatter(
            layout.indptr, layout.indices, layout.data, layout.indptr[:0], belief, out, threads
        )
    return None


@overload(advance, jit_options=JIT)
def _advance_csr_entries(layout, belief, out, threads):
    if _is(layout, CsrEntries):
        return lambda layout, belief, out, threads: _scatter(
            layout.indptr, layout.indices, layout.data, layout.entry_rows, belief, out, threads
        )
    return None


@overload(advance, jit_options=JIT)
def _advance_csr_panel(layout, belief, out, threads):
    if _is(layout, CsrPanel):

        def step(layout, belief, out, threads):
            advance(layout.rest, belief, out, threads)
            _add_panel(layout.columns, layout.panel, belief, out)

        return step
    return None


@overload(advance, jit_options=JIT)
def _advance_structured(layout, belief, out, threads):
    if _is(layout, Structured):

        def step(layout, belief, out, threads):
            advance(layout.sparse, belief, out, threads)
            _add_rank_one(layout.u, layout.v, belief, out)

        return step
    return None


@overload(advance, jit_options=JIT)
def _advance_low_rank(layout, belief, out, threads):
    if _is(layout, LowRank):

        def step(layout, belief, out, threads):
            advance(layout.correction, belief, out, threads)
            out += np.dot(layout.right, np.dot(belief, layout.left))

        return step
    return None


@overload(advance_block, jit_options=JIT)
def _advance_block_dense(layout, block, out):
    if _is(layout, Dense):
        return lambda layout, block, out: np.dot(block, layout.T, out)
    return None


@overload(advance_block, jit_options=JIT)
def _advance_block_csr(layout, block, out):
    if _is(layout, CsrRows) or _is(layout, CsrEntries):
        step = _csr_block_long if _is(layout, CsrRows) else _csr_block
        return lambda layout, block, out: step(
            layout.indptr, layout.indices, layout.data, block, out
        )
    return None


@overload(advance_block, jit_options=JIT)
def _advance_block_csr_panel(layout, block, out):
    if _is(layout, CsrPanel):

        def step(layout, block, out):
            advance_block(layout.rest, block, out)
            _add_panel_block(layout.columns, layout.panel, block, out)

        return step
    return None


@overload(advance_block, jit_options=JIT)
def _advance_block_structured(layout, block, out):
    if _is(layout, Structured):

        def step(layout, block, out):
            advance_block(layout.sparse, block, out)
            _add_rank_one_block(layout.u, layout.v, block, out)

        return step
    return None


@overload(advance_block, jit_options=JIT)
def _advance_block_low_rank(layout, block, out):
    if _is(layout, LowRank):

        def step(layout, block, out):
            advance_block(layout.correction, block, out)
            out += np.dot(layout.right, np.dot(layout.left.T, block))

        return step
    return None


@numba.njit(**JIT)
def step(layout, belief, out, threads):
    """``out = belief @ T`` (n,) for the matrix of ``layout``: one step, as the recursion takes
    it, callable from Python (benchmarks and tests)."""
    advance(layout, belief, out, threads)


@numba.njit(**JIT)
def step_block(layout, block, out):
    """One block step, as the recursion takes it (``advance_block``: member-major (B, n) or
    state-major (n, B) as ``members_first`` says), callable from Python (benchmarks and
    tests)."""
    advance_block(layout, block, out)


# --- the recursions ----------------------------------------------------------------------


@numba.njit(**JIT)
def _condition(belief, likelihood):
    """``belief <- belief * likelihood / evidence`` in place; return the evidence.

    With zero evidence the belief is left as it was (the prediction).
    """
    evidence = 0.0
    for i in range(belief.size):
        evidence += belief[i] * likelihood[i]
    if evidence > 0.0:
        for i in range(belief.size):
            belief[i] = belief[i] * likelihood[i] / evidence
    return evidence


@numba.njit(**JIT)
def _condition_block(block, likelihoods, rows, evidence):
    """``_condition`` of every member ``b`` of a state-major block (n, B) observed at this
    step (``rows[b] >= 0``), reading the block row by row: the same numbers to the last bit
    as ``_condition`` of each column (each sum runs over the states in the same order),
    without reading a column of B-strided values per member. ``evidence`` (B,) is output.
    """
    n, size = block.shape
    evidence[:] = 0.0
    if not (rows >= 0).any():  # nothing observed this step (prediction): nothing to read
        return
    for i in range(n):
        for b in range(size):
            if rows[b] >= 0:
                evidence[b] += block[i, b] * likelihoods[rows[b], i]
    for i in range(n):
        for b in range(size):
            if rows[b] >= 0 and evidence[b] > 0.0:
                block[i, b] = block[i, b] * likelihoods[rows[b], i] / evidence[b]


@numba.njit(**JIT)
def forward(
    layout,
    initial,
    likelihoods,
    rows,
    prune_target,
    beliefs,
    elapsed,
    zero,
    pruned,
    threads,
    resume,
    log_evidence,
):
    """The forward recursion of one sequence, or of the next steps of one (``resume``).

    Parameters
    ----------
    layout : the transition matrix as a layout of this module (``Dense``, ``CsrRows``, ...).
    initial : (n,) ``P(S_0)``; with ``resume``, the belief of the step before ``rows[0]``.
    likelihoods : (k, n) ``P(o | S)`` for each distinct observed symbol.
    rows : (T,) int, the row of ``likelihoods`` observed at step t, or -1.
    prune_target : float, the mass of the top-p states kept after each step's
        conditioning (above 1: no pruning).
    beliefs : (H, n) output, ``P(S_t | o_0..o_t)`` of step t in row ``t % H``: the whole
        history where H = T, the last H steps' otherwise (H >= 2 unless T = 1).
    elapsed : (T,) output, seconds from the start to the end of step t.
    zero : (T,) bool output, True where the observation had zero probability.
    pruned : (T,) output, the belief mass pruning removed at step t.
    threads : int, the threads a step may use (``step_threads(layout)`` of the caller;
        passed in, as compiled code that reads numba's setting cannot be cached).
    resume : bool, step 0 advances ``initial`` (the recursion continued, chunk by chunk: the
        same numbers to the last bit as one call) instead of starting from it.
    log_evidence : float, the log evidence of the steps before (0.0 for a new sequence).

    Returns
    -------
    float
        The log evidence ``log P(o_0..o_{T-1})`` (with the steps before, when resumed);
        ``-inf`` if any step had zero evidence.
    """
    clock = np.zeros(2, np.int64)
    start = monotonic(clock)
    n, history = initial.size, beliefs.shape[0]
    work, mark = np.empty(n, np.int64), np.zeros(n, np.bool_)
    for t in range(rows.size):
        belief = beliefs[t % history]
        if t > 0:
            advance(layout, beliefs[(t - 1) % history], belief, threads)
        elif resume:
            advance(layout, initial, belief, threads)
        else:
            belief[:] = initial
        if rows[t] >= 0:
            evidence = _condition(belief, likelihoods[rows[t]])
            if evidence > 0.0:
                log_evidence += np.log(evidence)
            else:
                zero[t] = True
                log_evidence = -np.inf
        pruned[t] = prune(belief, prune_target, work, mark)
        elapsed[t] = monotonic(clock) - start
    return log_evidence


@numba.njit(**JIT)
def forward_block(
    layout,
    initial,
    likelihoods,
    rows,
    prune_target,
    beliefs,
    elapsed,
    zero,
    pruned,
    log_evidence,
):
    """``forward`` for B sequences at once: one block product per step.

    ``rows`` (B, T), ``zero`` (B, T), ``pruned`` (B, T) and ``log_evidence`` (B,) hold
    member ``b`` in row ``b``; ``elapsed`` (T,) is shared. The blocks, ``initial`` and each
    ``beliefs[t % H]`` (step t's, as in ``forward``), are member-major, ``initial`` (B, n)
    and ``beliefs`` (H, B, n), where the layout takes such blocks (``members_first``), else
    state-major, (n, B) and (H, n, B).
    """
    clock = np.zeros(2, np.int64)
    start = monotonic(clock)
    members = _members_first(layout)
    size, history = rows.shape[0], beliefs.shape[0]
    n = initial.shape[1] if members else initial.shape[0]
    work, mark, member = np.empty(n, np.int64), np.zeros(n, np.bool_), np.empty(n)
    evidence = np.zeros(size)
    for t in range(elapsed.size):
        block = beliefs[t % history]
        if t == 0:
            block[:, :] = initial
        else:
            advance_block(layout, beliefs[(t - 1) % history], block)
        if members:
            for b in range(size):
                if rows[b, t] >= 0:
                    evidence[b] = _condition(block[b], likelihoods[rows[b, t]])
        else:
            _condition_block(block, likelihoods, rows[:, t], evidence)
        for b in range(size):
            if rows[b, t] >= 0:
                if evidence[b] > 0.0:
                    log_evidence[b] += np.log(evidence[b])
                else:
                    zero[b, t] = True
                    log_evidence[b] = -np.inf
            if prune_target > 1.0:
                continue
            if members:
                pruned[b, t] = prune(block[b], prune_target, work, mark)
            else:  # pruning sorts each member: one column at a time
                member[:] = block[:, b]
                pruned[b, t] = prune(member, prune_target, work, mark)
                block[:, b] = member
        elapsed[t] = monotonic(clock) - start
