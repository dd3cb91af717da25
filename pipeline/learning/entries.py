"""The entries EM learns of a matrix, and the M-step of a row-stochastic matrix over them.

A dense matrix learns every entry; a CSR one its stored entries, so its pattern stays what it
was (an entry outside the pattern is zero and stays zero, as EM keeps any zero). The
structured formats (``SparsePlusRankOne``, ``LowRank``) have no entries to learn one by one:
``entries`` refuses them in one line. One ``functools.singledispatch`` function per
operation, as ``pipeline.operators`` has, so the learnt formats are named in one place.

The M-step of one row ``i`` (``reestimate``) from expected counts ``c_ij`` over the entries
the E-step kept (``K_i``) and the previous values ``a_ij``:

    a'_ij = (1 - sum_{l not in K_i} a_il) c_ij / sum_{l in K_i} c_il   (j in K_i),
    a'_ij = a_ij                                                       (j not in K_i),

the maximiser of the expected complete-data log-likelihood ``sum_j c_ij log a'_ij`` over
the kept entries with the others held at their values. With every entry kept (exact EM) it
is Baum-Welch's ``c_ij / sum_l c_il`` (Rabiner, "A Tutorial on Hidden Markov Models",
eq. 40b). A row without counts (``sum_{l in K_i} c_il = 0``: the E-step never saw its state)
keeps its previous values.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from pipeline.operators import entries_at, entry_rows, toarray


class Entries(NamedTuple):
    """The learnt entries of a matrix of shape (n, m), k of them.

    rows, columns : ndarray of int, shape (k,)
        Each entry's position: every one of a dense matrix (row-major), the stored ones of CSR.
    values : ndarray, shape (k,)
        The matrix's values there.
    build : callable
        ``build(values)``: the matrix of the same format and pattern with ``values`` (k,).
    """

    rows: np.ndarray
    columns: np.ndarray
    values: np.ndarray
    build: Callable[[np.ndarray], np.ndarray | sp.csr_array]


@singledispatch
def entries(matrix, name: str) -> Entries:
    """The entries EM learns of ``matrix`` (``Entries``); ``ValueError`` in one line for a
    format it cannot learn entry by entry, naming ``name`` and the format."""
    raise ValueError(
        f"{name} is {type(matrix).__name__}, whose entries EM cannot learn one by one; "
        "allowed: dense or CSR matrices (pass a dense or CSR model)"
    )


@entries.register
def _(matrix: np.ndarray, name: str) -> Entries:
    n, m = matrix.shape
    return Entries(
        np.repeat(np.arange(n), m),
        np.tile(np.arange(m), n),
        matrix.ravel(),
        lambda values: values.reshape(n, m),
    )


@entries.register
def _(matrix: sp.csr_array, name: str) -> Entries:
    indices, indptr = matrix.indices, matrix.indptr
    return Entries(
        entry_rows(indptr),
        indices,
        matrix.data,
        lambda values: sp.csr_array((values, indices, indptr), shape=matrix.shape),
    )


@singledispatch
def values_at(matrix, other) -> np.ndarray:
    """The values of ``other`` (any format, the shape of ``matrix``) at ``matrix``'s learnt
    entries, shape (k,): what an E-step's counts, or an approximation's matrix, give there."""
    raise TypeError(f"unsupported matrix type {type(matrix).__name__}")


@values_at.register
def _(matrix: np.ndarray, other) -> np.ndarray:
    return np.asarray(toarray(other), dtype=np.float64).ravel()


@values_at.register
def _(matrix: sp.csr_array, other) -> np.ndarray:
    return entries_at(other, entry_rows(matrix.indptr), matrix.indices)


def reestimate(
    previous: np.ndarray, counts: np.ndarray, kept: np.ndarray | None, rows: np.ndarray
) -> np.ndarray:
    """The M-step of a row-stochastic matrix's entries (the formula above).

    Parameters
    ----------
    previous : ndarray, shape (k,)
        The entries' values before the step (``Entries.values``); each row sums to 1.
    counts : ndarray, shape (k,)
        Their expected counts (zero off the kept entries).
    kept : ndarray of bool, shape (k,), or None
        The entries the E-step kept; None for all of them (exact EM).
    rows : ndarray of int, shape (k,)
        Each entry's row.

    Returns
    -------
    ndarray, shape (k,): the new values, every row summing to 1.
    """
    n_rows = int(rows.max(initial=-1)) + 1
    if kept is None:
        kept = np.ones(previous.size, dtype=bool)
    seen = np.bincount(rows, weights=np.where(kept, counts, 0.0), minlength=n_rows)
    held = np.bincount(rows, weights=np.where(kept, 0.0, previous), minlength=n_rows)
    learnt = kept & (seen > 0)[rows]
    # counts / seen (at most 1) before the free mass: a row whose counts are subnormal (a
    # state the posteriors all but never visit) would overflow (1 - held) / seen
    fraction = np.divide(counts, seen[rows], out=np.zeros(previous.size), where=learnt)
    return np.where(learnt, fraction * (1.0 - held)[rows], previous)
