"""Top-p distributions (Definitions 2 to 4 and Algorithm 1 of the top-p paper).

The top-p set of a distribution is the shortest prefix of its sorted order
(probabilities descending, ties broken by the lower index first) whose mass
reaches ``p``; the top-p distribution keeps that set and renormalises it by
its mass. A mass within ``TOLERANCE`` below ``p`` counts as reaching ``p``, so
that sums that equal ``p`` in exact arithmetic (the paper's examples) do.
``p = 1`` keeps every non-zero entry, as exact arithmetic does.

One compiled row kernel serves vectors, dense matrices and CSR matrices. It
finds the cut with a mass-weighted quickselect (expected linear time): every
entry above the cut's value is kept, and entries tied at the cut's value are
taken in index order until the mass reaches ``p``. Only when the cut could fall
among the entries above the tie level (a sum within rounding of ``p``) does it
sort them, to follow Algorithm 1's order exactly.
"""

from __future__ import annotations

import functools
import itertools

import numba
import numpy as np
import scipy.sparse as sp

from pipeline.models.hmm import HMM
from pipeline.models.structured import SparsePlusRankOne, entry_rows

TOLERANCE = 1e-12
"""A prefix whose mass is at least ``p - TOLERANCE`` reaches ``p``."""

_SELECTION_MARGIN = 1e-9
"""The quickselect aims this far past ``p`` so its differently ordered sums never cut short."""

_BLOCK_ENTRIES = 2**20
"""Dense input is processed in row blocks of about this many entries."""


def _target(p) -> float:
    """The mass a prefix must reach; ``inf`` for ``p = 1`` (keep every non-zero entry)."""
    if isinstance(p, bool) or not isinstance(p, int | float | np.integer | np.floating):
        raise TypeError(f"p must be a number in (0, 1], got {p!r}")
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    return np.inf if p == 1 else float(p) - TOLERANCE


@numba.njit(cache=True, nogil=True)
def _median3(a, b, c):
    if a < b:
        a, b = b, a
    if b < c:
        b = c
    return a if a < b else b


@numba.njit(cache=True, nogil=True)
def _select(values, work, m, goal):
    """Mass-weighted three-way quickselect on ``work[:m]`` (positions into ``values``).

    Reorders ``work[:m]`` so that ``work[:greater]`` hold values above a
    threshold ``x`` and ``work[greater:equal]`` the values equal to it, where the
    prefix ``work[:equal]`` has mass >= ``goal`` and ``work[:greater]`` less.
    Returns ``(greater, equal)``, or ``(m, m)`` when ``goal`` is not reached.
    """
    lo, hi, acc = 0, m, 0.0
    while lo < hi:
        x = _median3(values[work[lo]], values[work[(lo + hi) // 2]], values[work[hi - 1]])
        a, i, b = lo, lo, hi
        above, level = 0.0, 0.0
        while i < b:
            v = values[work[i]]
            if v > x:
                work[a], work[i] = work[i], work[a]
                above += v
                a += 1
                i += 1
            elif v < x:
                b -= 1
                work[i], work[b] = work[b], work[i]
            else:
                level += v
                i += 1
        if acc + above >= goal:
            hi = a
        elif acc + above + level >= goal:
            return a, b
        else:
            acc += above + level
            lo = b
    return m, m


@numba.njit(cache=True, nogil=True)
def _mark_sorted_prefix(values, work, m, target, mark):
    """Mark Algorithm 1's prefix of ``work[:m]`` by a full sort; return (count, mass)."""
    order = np.sort(work[:m])
    order = order[np.argsort(-values[order], kind="mergesort")]
    mass = 0.0
    k = 0
    while k < m:
        mass += values[order[k]]
        mark[order[k]] = True
        k += 1
        if mass >= target:
            break
    return k, mass


@numba.njit(cache=True, nogil=True)
def _kept(values, target, work, mark):
    """The top-p set of one row.

    ``values`` (d,) are non-negative; ``work`` (int64) and ``mark`` (bool,
    all False) are scratch of length >= d. Writes the kept positions, ascending,
    to ``work[:k]``, leaves ``mark`` all False, and returns ``(k, mass)`` with
    ``mass`` the kept set's total.
    """
    d = values.size
    m = 0
    for j in range(d):
        if values[j] > 0:
            work[m] = j
            m += 1
    if target > 1.0:  # p = 1: every non-zero entry
        mass = 0.0
        for j in range(m):
            mass += values[work[j]]
        return m, mass
    greater, equal = _select(values, work, m, target + _SELECTION_MARGIN)
    mass, smallest = 0.0, np.inf
    for j in range(greater):
        mass += values[work[j]]
        smallest = min(smallest, values[work[j]])
    if greater > 0 and mass - smallest >= target - _SELECTION_MARGIN:
        # The cut may fall inside the entries above the tie level: sort them all.
        k, mass = _mark_sorted_prefix(values, work, m, target, mark)
    else:
        # Every entry above the tie level is kept; ties are taken by lower index first.
        k = greater
        for j in range(greater):
            mark[work[j]] = True
        if mass < target and equal > greater:
            level = values[work[greater]]
            for j in range(d):
                if values[j] == level:
                    mark[j] = True
                    mass += level
                    k += 1
                    if mass >= target:
                        break
        if mass < target and equal < m:  # the quickselect's rounding fell short
            mark[:] = False
            k, mass = _mark_sorted_prefix(values, work, m, target, mark)
    k = 0
    for j in range(d):
        if mark[j]:
            mark[j] = False
            work[k] = j
            k += 1
    return k, mass


@numba.njit(cache=True, nogil=True)
def _row(r, indptr, in_data, dense):
    """Row ``r`` of a row block: ``dense[r]``, or the stored values of CSR row ``r``."""
    if dense.shape[0] > 0:
        return dense[r]
    return in_data[indptr[r] : indptr[r + 1]]


@numba.njit(cache=True, nogil=True)
def _cut_rows(indptr, in_data, dense, target, counts, level, ties, mass):
    """First pass: find each row's top-p set and record where it is cut.

    A row block is ``dense`` (rows, d) when that has rows, else CSR (``indptr``,
    ``in_data``). For row ``r`` writes the kept count ``counts[r]``, the smallest
    kept value ``level[r]``, how many kept entries equal it ``ties[r]``, and the
    kept mass ``mass[r]``. By the prefix property of the sorted order the set is
    then every entry above ``level[r]`` and the first ``ties[r]`` equal to it.
    """
    n_rows = dense.shape[0] if dense.shape[0] > 0 else indptr.size - 1
    width = dense.shape[1]
    for r in range(indptr.size - 1):
        width = max(width, indptr[r + 1] - indptr[r])
    work = np.empty(width, np.int64)
    mark = np.zeros(width, np.bool_)
    for r in range(n_rows):
        row = _row(r, indptr, in_data, dense)
        k, mass[r] = _kept(row, target, work, mark)
        smallest, equal = np.inf, 0
        for j in range(k):
            value = row[work[j]]
            if value < smallest:
                smallest, equal = value, 1
            elif value == smallest:
                equal += 1
        counts[r], level[r], ties[r] = k, smallest, equal


@numba.njit(cache=True, nogil=True)
def _fill_rows(indptr, in_indices, in_data, dense, level, ties, mass, indices, data):
    """Second pass: write each row's kept columns and renormalised values, one scan per row.

    Block and cut arguments as in ``_cut_rows``; the rows' entries go one after
    the other into ``indices`` and ``data``.
    """
    n_rows = dense.shape[0] if dense.shape[0] > 0 else indptr.size - 1
    position = 0
    for r in range(n_rows):
        row = _row(r, indptr, in_data, dense)
        cut, left, total = level[r], ties[r], mass[r]
        for j in range(row.size):
            value = row[j]
            if value < cut:
                continue
            if value == cut:
                if left == 0:
                    continue
                left -= 1
            indices[position] = j if dense.shape[0] > 0 else in_indices[indptr[r] + j]
            data[position] = value / total
            position += 1


def _check_rows(name: str, values: np.ndarray) -> None:
    if not (np.isfinite(values).all() and (values >= 0).all()):
        raise ValueError(f"{name} must have finite, non-negative entries")


def topp_vector(v, p) -> np.ndarray:
    """The top-p distribution of a probability vector (Algorithm 1).

    Parameters
    ----------
    v : array_like, shape (d,)
        A probability distribution (non-negative, summing to 1).
    p : float in (0, 1]
        The mass to keep.

    Returns
    -------
    ndarray, shape (d,)
        ``v`` on its top-p set divided by the set's mass, 0 elsewhere.

    >>> topp_vector([0.3, 0.25, 0.15, 0.2, 0.06, 0.04], 0.9).round(4)
    array([0.3333, 0.2778, 0.1667, 0.2222, 0.    , 0.    ])
    """
    target = _target(p)
    values = np.ascontiguousarray(v, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"v must be a non-empty 1-D array, got shape {values.shape}")
    _check_rows("v", values)
    if not values.sum() > 0:
        raise ValueError("v must have positive mass")
    work = np.empty(values.size, np.int64)
    k, mass = _kept(values, target, work, np.zeros(values.size, np.bool_))
    out = np.zeros_like(values)
    out[work[:k]] = values[work[:k]] / mass
    return out


def topp_matrix(P, p) -> sp.csr_array:
    """Every row's top-p distribution, as a CSR array with sorted indices.

    Parameters
    ----------
    P : ndarray, scipy sparse matrix or SparsePlusRankOne, shape (n, d)
        Row-stochastic. Rows are processed in blocks in two passes (count each
        row's top-p set, then fill the exactly sized result), so no ``(n, d)``
        temporary is ever made. A structured matrix is cut among its stored
        entries wherever those above the row's background reach ``p``; other
        rows are generated densely, a block at a time.
    p : float in (0, 1]

    Returns
    -------
    csr_array, shape (n, d)
        Row ``i`` is ``topp_vector(P[i], p)``, with no stored zeros.
    """
    target = _target(p)
    if isinstance(P, SparsePlusRankOne):
        return _assemble(_structured_blocks(P, target), P.shape, target)
    if sp.issparse(P):
        P = sp.csr_array(P, dtype=np.float64)
        if not P.has_canonical_format:
            P = P.copy()
            P.sum_duplicates()
        return _assemble([functools.partial(_csr_block, P)], P.shape, target)
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2:
        raise ValueError(f"P must be 2-D, got shape {P.shape}")
    step = max(1, _BLOCK_ENTRIES // max(P.shape[1], 1))
    blocks = [
        functools.partial(_dense_block, P[start : start + step]) for start in range(0, len(P), step)
    ]
    return _assemble(blocks, P.shape, target)


def _assemble(blocks: list, shape: tuple[int, int], target: float) -> sp.csr_array:
    """The top-p CSR array of consecutive row blocks.

    ``blocks`` are callables returning a block's ``(indptr, indices, data,
    dense)`` kernel arguments; each is called once per pass, so at most one
    generated block exists at a time. The first pass checks the values.
    """
    n = shape[0]
    counts, ties = np.empty(n, np.int64), np.empty(n, np.int64)
    level, mass = np.empty(n), np.empty(n)
    edges = [0]
    for block in blocks:
        indptr, _, data, dense = block()
        _check_rows("P", dense if dense.shape[0] else data)
        rows = slice(edges[-1], edges[-1] + (dense.shape[0] or indptr.size - 1))
        _cut_rows(indptr, data, dense, target, counts[rows], level[rows], ties[rows], mass[rows])
        edges.append(rows.stop)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    index_dtype = np.int32 if max(shape[1], indptr[-1]) < 2**31 else np.int64
    indices, data = np.empty(indptr[-1], index_dtype), np.empty(indptr[-1])
    for block, (start, stop) in zip(blocks, itertools.pairwise(edges), strict=True):
        rows, entries = slice(start, stop), slice(indptr[start], indptr[stop])
        cut = level[rows], ties[rows], mass[rows]
        _fill_rows(*block(), *cut, indices[entries], data[entries])
    matrix = sp.csr_array((data, indices, indptr.astype(index_dtype)), shape=shape)
    matrix.has_sorted_indices = True
    return matrix


def _dense_block(rows: np.ndarray) -> tuple:
    """The kernel arguments for a dense row block (C-contiguous)."""
    rows = np.ascontiguousarray(rows)
    return np.zeros(1, np.int64), np.empty(0, np.int32), np.empty(0), rows


def _csr_block(rows: sp.csr_array) -> tuple:
    """The kernel arguments for a canonical CSR row block."""
    return rows.indptr, rows.indices, rows.data, np.empty((0, 0))


def _structured_blocks(P: SparsePlusRankOne, target: float) -> list:
    """Row blocks of ``P`` (as ``_assemble`` takes them): stored entries where they
    decide the cut, dense rows generated a block at a time elsewhere.

    Where ``v`` is constant, the entries of row ``i`` off the pattern all equal
    the background ``u[i] * v[0]`` and come after every larger stored entry in
    the sorted order: if the stored entries above the background reach ``p``,
    the cut is among them and the CSR kernel finds it on those alone.
    """
    n, m = P.shape
    full = P.pattern()
    counts = np.diff(full.indptr)
    background = P.background
    if background is None or target > 1.0:
        direct = np.zeros(n, dtype=bool)
        above = np.zeros(n)
    else:
        level = np.repeat(background, counts)
        above = np.bincount(
            entry_rows(full.indptr),
            weights=np.where(full.data > level, full.data, 0.0),
            minlength=n,
        )
        direct = above >= target
    _refuse_huge(P, target, ~direct, above, counts)
    blocks = []
    edges = [0, *(np.flatnonzero(np.diff(direct.astype(np.int8))) + 1).tolist(), n]
    step = max(1, _BLOCK_ENTRIES // max(m, 1))
    for start, stop in itertools.pairwise(edges):
        if direct[start]:
            blocks.append(functools.partial(_csr_block, full[start:stop]))
        else:
            blocks += [
                functools.partial(_structured_rows, P, k, min(k + step, stop))
                for k in range(start, stop, step)
            ]
    return blocks


def _structured_rows(P: SparsePlusRankOne, start: int, stop: int) -> tuple:
    """The kernel arguments for rows ``start:stop`` of ``P``, generated densely."""
    return _dense_block(P.rows(start, stop))


_MAX_ENTRIES = 5 * 10**8
"""A structured top-p matrix may not grow past this many entries (6 GB)."""


def _refuse_huge(P: SparsePlusRankOne, target, fallback, above, counts) -> None:
    """Raise ``ValueError`` when the dense rows' cuts would keep too much background."""
    if not fallback.any():
        return
    background = P.background
    if background is None or target > 1.0:
        estimate = fallback.sum() * P.shape[1]
    else:
        needed = np.ceil((target - above[fallback]) / np.maximum(background[fallback], 1e-300))
        estimate = float(np.minimum(needed + counts[fallback], P.shape[1]).sum())
    if estimate > _MAX_ENTRIES:
        raise ValueError(
            f"top-p would keep about {estimate:.3g} entries: in {int(fallback.sum())} rows the "
            f"peaks hold less than p and the cut reaches the background; choose a smaller p"
        )


def topp_hmm(hmm: HMM, p) -> HMM:
    """The top-p HMM of ``hmm`` (Definition 4).

    The prior, every transition row and every emission row are replaced by
    their top-p distributions; transition and emission become CSR arrays, the
    prior stays a dense vector.
    """
    _target(p)
    return HMM(
        topp_vector(hmm.prior, p),
        topp_matrix(hmm.transition, p),
        topp_matrix(hmm.emission, p),
    )


def kept_mass(P, Q: sp.csr_array) -> np.ndarray:
    """The mass of each row of ``P`` that its top-p row ``Q`` keeps, shape (n,).

    ``sum_{j: Q[i, j] > 0} P[i, j]``, the normaliser of Algorithm 1: at least
    ``p``, and ``1 - kept_mass`` is ``TV(P[i], Q[i])`` (Theorem 4.1's proof).
    ``P`` is dense, sparse or structured; ``Q = topp_matrix(P, p)``.
    """
    rows = entry_rows(Q.indptr)
    if isinstance(P, SparsePlusRankOne):
        values = P.at(rows, Q.indices)
    elif sp.issparse(P):
        values = np.asarray(sp.csr_array(P)[rows, Q.indices]).ravel()
    else:
        values = np.asarray(P)[rows, Q.indices]
    return np.bincount(rows, weights=values, minlength=Q.shape[0])
