"""The operations every transition (or emission) matrix format answers.

Each is a ``functools.singledispatch`` function; the module of each format
(``dense``, ``csr``, ``structured``, ``lowrank``) registers its implementation. A
matrix of shape (n, m) is row-stochastic where the pipeline uses it: row ``i`` is
``P(S_{t+1} | S_t = i)`` or ``P(O_t | S_t = i)``.

Beside the operations: what some of them return (``Peaks``, ``Products``, and the row
blocks of a selection, ``DenseRows`` and ``SparseRows``), the limits on the work a
format may do for one (``BLOCK_ENTRIES``, ``MAX_GENERATED``), and the error helpers
the formats share (``bad_entry``, ``check_real``, ``check_factors``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch
from typing import NamedTuple

import numpy as np

from pipeline.kernels import select

BLOCK_ENTRIES = 2**20
"""Rows are handed out in blocks of about this many entries (8 MiB of float64)."""

MAX_GENERATED = 2 * 10**9
"""A format that generates rows for a selection refuses to generate more entries than this
(about ten seconds of work)."""


class Peaks(NamedTuple):
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

    generated = False  # views of stored rows: cheap to make again

    @property
    def n_rows(self) -> int:
        return self.indptr.size - 1

    def entries(self) -> np.ndarray:
        return self.data

    def cut(self, rule: int, target: float, counts, level, ties, mass) -> None:
        select.cut_csr(self.indptr, self.data, rule, target, counts, level, ties, mass)

    def fill(self, level, ties, mass, indices, data) -> None:
        select.fill_csr(self.indptr, self.indices, self.data, level, ties, mass, indices, data)


class Products(NamedTuple):
    """A matrix ``T`` (n, m)'s two batched products, made once per matrix.

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


@singledispatch
def batch_products(T) -> Products:
    """``T``'s forward and backward products of a batch of vectors (``Products``), in the
    format's own cost: what a batched forward-backward recursion steps with."""
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def mixing_rate_part(T, which: np.ndarray) -> float:
    """``min over i in which, k > i of sum_j min(T[i, j], T[k, j])`` (inf if no pair).

    The minimum over a partition of ``range(n - 1)`` is the minimal mixing rate.
    """
    raise TypeError(f"unsupported matrix type {type(T).__name__}")


@singledispatch
def doeblin_lower_bound(T) -> float:
    """``sum_j min_i T[i, j]``: the mass every row shares, a lower bound on gamma."""
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
