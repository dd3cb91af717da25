"""The operations every transition (or emission) matrix format answers.

Each is a ``functools.singledispatch`` function; the module of each format
(``dense``, ``csr``, ``structured``, ``lowrank``) registers its implementation. A
matrix of shape (n, m) is row-stochastic where the pipeline uses it: row ``i`` is
``P(S_{t+1} | S_t = i)`` or ``P(O_t | S_t = i)``.

Three of them are the step-operator protocol the recursions of ``pipeline.inference`` run
over: ``forward_product`` (``belief @ T``), ``backward_product`` (``T @ message``, the
transpose step) and ``max_product`` (Viterbi's step). Every matrix format answers them by
the compiled step of its ``layout``, and a format with a layout (``compiled``) has its whole
horizon run by the compiled recursions of ``pipeline.kernels``. A transition that is not a
matrix (the coupled joint chain's contraction, ``pipeline.coupled.exact.JointTransition``)
registers the three products, and ``as_operator``, ``check_entries`` and ``row_sums`` so
that it is checked as a matrix is (``StepOperator``); ``pipeline.inference`` runs the same
recursions over it, and over transitions that change with time, in a Python loop.

Beside the operations: what some of them return (``Peaks``, ``MaxProduct``, ``Products``,
and the row blocks of a selection, ``DenseRows`` and ``SparseRows``), the limits on the
work a format may do for one (``BLOCK_ENTRIES``, ``MAX_GENERATED``), the error helpers
the formats share (``bad_entry``, ``check_real``, ``check_factors``), and the runners of
the compiled steps the formats' products share (``run_backward``, ``run_max_product``).
This module is longer than most (about 430 lines) because it is the one contract every
format implements: each operation's generic function and docstring, read side by side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import singledispatch
from typing import NamedTuple, Protocol

import numpy as np

from pipeline.kernels import backward, forward, maxproduct, select

BLOCK_ENTRIES = 2**20
"""Rows are handed out in blocks of about this many entries (8 MiB of float64)."""

MAX_GENERATED = 2 * 10**9
"""A format that generates rows for a selection refuses to generate more entries than this
(about ten seconds of work)."""


@dataclass(frozen=True)
class Peaks:
    """The stored entries of a matrix whose rows are peaks on a constant background.

    Every entry of row ``i`` off the stored pattern equals ``background[i]``.
    ``mass[i]`` and ``count[i]`` are the total and number of row ``i``'s stored
    entries strictly above ``background[i]``: when they already decide a
    selection (top-p mass, top-k count), it can run on the stored entries alone.
    """

    background: np.ndarray
    mass: np.ndarray
    count: np.ndarray


class DenseRows(NamedTuple):
    """A block of rows as a dense C-contiguous array ``values`` (r, m); ``generated`` when
    computed from another format (costly to make again), not a view of stored rows."""

    values: np.ndarray
    generated: bool = False

    @property
    def n_rows(self) -> int:
        return self.values.shape[0]

    def entries(self) -> np.ndarray:
        return self.values

    def cut(self, rule: int, target: float, counts, level, ties, mass) -> None:
        """Record each row's selection (``pipeline.kernels.select.cut_dense``)."""
        select.cut_dense(self.values, rule, target, counts, level, ties, mass)

    def fill(self, level, ties, mass, indices, data) -> None:
        """Write the selected entries (``pipeline.kernels.select.fill_dense``)."""
        select.fill_dense(self.values, level, ties, mass, indices, data)


class SparseRows(NamedTuple):
    """A block of rows as canonical CSR arrays; only stored entries are candidates."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @property
    def generated(self) -> bool:
        """False: views of stored rows, cheap to make again."""
        return False

    @property
    def n_rows(self) -> int:
        return self.indptr.size - 1

    def entries(self) -> np.ndarray:
        return self.data

    def cut(self, rule: int, target: float, counts, level, ties, mass) -> None:
        select.cut_csr(self.indptr, self.data, rule, target, counts, level, ties, mass)

    def fill(self, level, ties, mass, indices, data) -> None:
        select.fill_csr(self.indptr, self.indices, self.data, level, ties, mass, indices, data)


class MaxProduct(NamedTuple):
    """One max-product step from weights ``w`` (n,) through ``T`` (n, m).

    values : ndarray, shape (m,)
        ``values[j] = max_i w[i] T[i, j]``.
    states : ndarray of int64, shape (m,)
        The least ``i`` attaining it (ties go to the lowest state index; 0 where every
        product is zero, as ``argmax`` gives).
    """

    values: np.ndarray
    states: np.ndarray


class Products(NamedTuple):
    """``forward_product`` and ``backward_product`` of one matrix ``T`` (n, m), its layout
    made once (``batch_products``).

    forward : ``X @ T`` for a batch of row vectors ``X`` (B, n), shape (B, m).
    backward : ``Y @ T.T`` (each row ``T @ y``) for a batch ``Y`` (B, m), shape (B, n).
    """

    forward: Callable[[np.ndarray], np.ndarray]
    backward: Callable[[np.ndarray], np.ndarray]


def bad_entry(name: str, row: int, column: int, value: float, *, vector: bool) -> ValueError:
    """The error for a negative or non-finite entry at ``(row, column)``."""
    where = f"{name}[{column}]" if vector else f"{name}[{row}, {column}]"
    return ValueError(f"{where} = {float(value):.12g}; entries must be finite and non-negative")


def check_real(values: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` unless ``values`` holds real numbers (booleans, integers or
    floats): complex entries are refused rather than cast, which would drop their imaginary
    parts, and so are objects and strings."""
    kind = np.asarray(values).dtype
    if kind.kind not in "biuf":
        raise ValueError(f"{name} has {kind} entries; allowed: real numbers")


def check_factors(name: str, **factors: np.ndarray) -> None:
    """Raise ``ValueError`` naming the first negative or non-finite entry of any factor of a
    factored format (``name.factor[index]``): factors must be finite and non-negative."""
    for factor, values in factors.items():
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            where = tuple(int(k) for k in np.argwhere(bad)[0])
            raise ValueError(
                f"{name}.{factor}[{', '.join(map(str, where))}] = {float(values[where]):.12g}; "
                "the factors must be finite and non-negative"
            )


@singledispatch
def as_operator(matrix, name: str = "matrix"):
    """``matrix`` in its canonical format: float64, C-contiguous dense 2-D arrays,
    CSR with sorted indices and no duplicates, structured matrices as they are.

    Anything else array-like becomes a dense array; ``ValueError`` names ``name``
    when it is not 2-D.
    """
    return as_operator(np.asarray(matrix), name)


@singledispatch
def check_entries(T, name: str, *, vector: bool = False) -> None:
    """Raise ``ValueError`` naming the first negative or non-finite entry of ``T``.

    ``vector``: ``T`` is one distribution as a single row (messages name no row).
    """
    raise TypeError(f"{name}: unsupported matrix type {type(T).__name__}")


@singledispatch
def row_sums(T) -> np.ndarray:
    """``T.sum(axis=1)``, shape (n,)."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def rows(T, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` as a dense array, shape (stop - start, m)."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def columns(T, which: np.ndarray) -> np.ndarray:
    """Columns ``which`` as a dense array, shape (n, len(which))."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def entries_at(T, row: np.ndarray, column: np.ndarray) -> np.ndarray:
    """The entries at positions ``(row[k], column[k])``, shape (k,)."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def toarray(T) -> np.ndarray:
    """The whole matrix as a dense array, shape (n, m): for small n (tests, references)."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def stored_entries(T) -> int:
    """How many numbers the format stores for ``T``: its memory in values."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def count_nonzero(T) -> int:
    """How many entries of the matrix ``T`` represents are non-zero."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def step_work(T, support: np.ndarray) -> int:
    """Multiply-adds of one step ``belief @ T`` from a belief whose non-zero states are
    ``support`` (bool, shape (n,)): the rows it must read, and any fixed cost."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def layout(T) -> tuple:
    """``T`` as the compiled forward recursion reads it: a layout of
    ``pipeline.kernels.forward`` (``Dense``, ``CsrRows``, ``CsrEntries``, ``CsrPanel``,
    ``Structured``, ``LowRank``)."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


def as_vectors(values, size: int, name: str) -> np.ndarray:
    """``values`` as float64 of shape (size,) or (B, size), C-contiguous; else ValueError."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    if values.ndim not in (1, 2) or values.shape[-1] != size:
        raise ValueError(f"{name} must have shape ({size},) or (B, {size}), got {values.shape}")
    return values


class StepOperator(Protocol):
    """A transition the recursions step through without reading it as a matrix: an object
    of shape (n, n) for which ``forward_product``, ``backward_product`` and ``max_product``
    (and, to be checked as a matrix is, ``as_operator``, ``check_entries`` and ``row_sums``)
    are registered. Every matrix format is one; so is ``pipeline.coupled.exact``'s
    ``JointTransition``."""

    @property
    def shape(self) -> tuple[int, ...]: ...


def compiled(T) -> bool:
    """Whether ``T``'s format has a layout of the compiled recursions (``layout``): a
    constant transition in such a format is stepped by ``pipeline.kernels``, any other
    ``StepOperator`` in a Python loop."""
    return layout.dispatch(type(T)) is not layout.dispatch(object)


@singledispatch
def forward_product(T, beliefs) -> np.ndarray:
    """``beliefs @ T``: the forward step (a scatter of each state's row), by the compiled
    step of ``T``'s layout (``layout``), the one the forward recursion takes.

    ``beliefs`` (n,) gives (m,); a batch (B, n) gives (B, m). Each call makes the layout:
    a caller stepping one matrix many times keeps ``batch_products(T)`` instead. A
    ``StepOperator`` without a layout registers its own.
    """
    return _forward_product(layout(T), as_vectors(beliefs, T.shape[0], "beliefs"), T.shape[1])


def _forward_product(compiled, beliefs: np.ndarray, width: int) -> np.ndarray:
    if beliefs.ndim == 1:
        out = np.empty(width)
        forward.step(compiled, beliefs, out, forward.step_threads(compiled))
        return out
    if forward.members_first(compiled):
        out = np.empty((beliefs.shape[0], width))
        forward.step_block(compiled, beliefs, out)
        return out
    out = np.empty((width, beliefs.shape[0]))
    forward.step_block(compiled, np.ascontiguousarray(beliefs.T), out)
    return out.T


def run_backward(compiled, messages: np.ndarray, height: int) -> np.ndarray:
    """``T @ messages`` (or ``messages @ T.T`` for a batch (B, m)) by the compiled backward
    step of the layout ``compiled`` (``pipeline.kernels.backward``); for the formats'
    ``backward_product``."""
    if messages.ndim == 1:
        out = np.empty(height)
        backward.step(compiled, messages, out)
        return out
    out = np.empty((height, messages.shape[0]))
    backward.step_block(compiled, np.ascontiguousarray(messages.T), out)
    return out.T


def run_max_product(compiled, weights: np.ndarray, width: int) -> MaxProduct:
    """The max-product step of the layout ``compiled`` (``pipeline.kernels.maxproduct``)
    from ``weights`` (n,), or from each row of a batch (B, n); for the formats'
    ``max_product``."""
    if weights.ndim == 2:
        parts = [run_max_product(compiled, row, width) for row in weights]
        return MaxProduct(np.stack([p.values for p in parts]), np.stack([p.states for p in parts]))
    values, states = np.empty(width), np.empty(width, np.int64)
    maxproduct.step(compiled, weights, values, states)
    return MaxProduct(values, states)


@singledispatch
def backward_product(T, messages) -> np.ndarray:
    """``T @ messages``: the backward step, a gather (each row sums its entries times the
    message at their columns), where the forward step ``belief @ T`` is a scatter.

    ``messages`` (m,) gives (n,); a batch (B, m) gives (B, n), each row ``T @ y``. The
    backward recursion of smoothing (``pipeline.kernels.backward``) takes the same step.
    """
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def max_product(T, weights) -> MaxProduct:
    """The max-product step of Viterbi: ``max_i weights[i] T[i, j]`` for every column ``j``
    and the state attaining it (``MaxProduct``); ``weights`` (n,), or a batch (B, n) whose
    fields then have shape (B, m).

    Dense, CSR and ``SparsePlusRankOne`` read their stored entries (and factors);
    ``LowRank`` generates its rows, and refuses above a size (``check_max_product``).
    """
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def check_max_product(T) -> None:
    """Raise ``ValueError`` in one line where ``T``'s max-product step would generate more
    entries than its format allows (``LowRank``: more than ``lowrank.MAX_DENSE``); nothing
    for the formats whose step reads their stored entries."""


@singledispatch
def expected_counts(T, before: np.ndarray, after: np.ndarray):
    """The matrix ``C[i, j] = sum_t before[t, i] * T[i, j] * after[t, j]``, shape (n, m), in
    ``T``'s own cost: smoothing's expected transition counts when ``before`` (T', n) are the
    filtered beliefs and ``after`` (T', m) the weighted backward messages.

    Dense: an ndarray. CSR: a ``csr_array`` on ``T``'s stored entries. ``SparsePlusRankOne``
    and ``LowRank`` (whose counts are not of their own form): a ``LowRank`` holding them
    exactly, of rank T' (``F T'`` for a ``LowRank`` of rank F), with the stored pattern's
    entries as its band.
    """
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


Sampler = Callable[[np.ndarray, np.random.Generator], np.ndarray]
"""``draw(rows, rng)``: one column per row index in ``rows`` (int, (d,)), column ``j`` of
row ``r`` with probability ``T[r, j] / sum_j T[r, j]``, as int64 (d,)."""


@singledispatch
def column_sampler(T) -> Sampler:
    """A function drawing a column from given rows of ``T`` (``Sampler``): what sampling
    draws the next states and the symbols with. Made once per matrix (cumulative sums of the
    stored entries, of the factors), it never generates a dense row of a sparse or factored
    matrix, but where a ``LowRank`` row's band keeps drawing the product's band positions
    (``REJECTIONS``)."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


REJECTIONS = 32
"""A ``LowRank`` draw off its band draws from the product and redraws while it lands on a
band position; a row that has redrawn this many times is generated and drawn from."""


def draw_dense(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One column from each row of ``values`` (d, m), non-negative, by inverse CDF."""
    cumulative = np.cumsum(values, axis=1)
    targets = rng.random(values.shape[0]) * cumulative[:, -1]
    drawn = (cumulative <= targets[:, None]).sum(axis=1)
    return np.minimum(drawn, values.shape[1] - 1).astype(np.int64)


def batch_products(T) -> Products:
    """``forward_product`` and ``backward_product`` of ``T`` with its layout made once, for
    a caller stepping one matrix many times from Python."""
    compiled = layout(T)
    n, m = T.shape
    return Products(
        lambda X: _forward_product(compiled, as_vectors(X, n, "X"), m),
        lambda Y: run_backward(compiled, as_vectors(Y, m, "Y"), n),
    )


@singledispatch
def least_overlap(T, which: np.ndarray) -> float:
    """``min over i in which, k > i of sum_j min(T[i, j], T[k, j])`` (inf if no pair).

    The minimum over a partition of ``range(n - 1)`` is the minimal mixing rate
    (``pipeline.metrics.mixing_rate_part`` hands out the parts).
    """
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def shared_mass(T) -> float:
    """``sum_j min_i T[i, j]``: the mass every row shares, unclipped
    (``pipeline.metrics.doeblin_lower_bound`` is its public form, a lower bound on gamma)."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def peaks(T) -> Peaks | None:
    """The peaks of ``T`` over its constant row backgrounds, or None where it has none."""
    return None


@singledispatch
def row_blocks(T, direct: np.ndarray | None = None) -> list[Callable[[], DenseRows | SparseRows]]:
    """Consecutive row blocks of ``T`` for row selection, each made when called.

    ``direct`` (bool, shape (n,), only for formats with ``peaks``) marks the rows
    whose selection the stored entries decide: those come as ``SparseRows`` of
    the stored entries, the others as generated ``DenseRows``. A view of stored rows
    may be made once per pass; a generated block only once (``select_matrix`` keeps its
    selection), so at most one generated block exists at a time.
    """
    raise TypeError(f"unsupported matrix type {type(T).__name__}")
