"""Row selection shared by top-p and top-k: keep part of each row, renormalise, store as CSR.

A rule is ``MASS`` with a target mass (top-p) or ``COUNT`` with a count
(top-k), both in Algorithm 1's order (``pipeline.kernels.select``). Rows come
from the matrix's format (``pipeline.operators.row_blocks``) in blocks, in two
passes (find each row's cut, then fill the exactly sized result), so no
``(n, m)`` temporary is ever made; a generated block (computed from another format,
e.g. a low-rank product) is made once: its selected entries are kept from the first
pass. For a structured matrix whose rows are peaks on a constant background, rows whose
stored peaks already decide the selection are cut among those alone; the others are
generated densely, a block at a time.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp

from pipeline.hmm import HMM
from pipeline.kernels.select import COUNT, MASS, count_target, kept, mass_target
from pipeline.methods.base import Approximation
from pipeline.operators import (
    Peaks,
    as_operator,
    entries_at,
    entry_rows,
    peaks,
    row_blocks,
)

MAX_ENTRIES = 5 * 10**8
"""A selected matrix may not grow past this many entries (6 GB)."""


def _check_rows(values: np.ndarray) -> None:
    if not (np.isfinite(values).all() and (values >= 0).all()):
        raise ValueError("rows must have finite, non-negative entries")


def select_vector(v, rule: int, target: float) -> np.ndarray:
    """The selected and renormalised distribution of a probability vector ``v`` (d,)."""
    values = np.ascontiguousarray(v, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"v must be a non-empty 1-D array, got shape {values.shape}")
    _check_rows(values)
    if not values.sum() > 0:
        raise ValueError("v must have positive mass")
    work = np.empty(values.size, np.int64)
    k, mass = kept(values, rule, target, work, np.zeros(values.size, np.bool_))
    out = np.zeros_like(values)
    out[work[:k]] = values[work[:k]] / mass
    return out


def _decided(rule: int, target: float, found: Peaks) -> np.ndarray:
    """Rows whose stored peaks above the background already decide the selection."""
    if rule == COUNT:
        return found.count >= target
    return found.mass >= target


def _estimate(rule: int, target: float, found: Peaks, direct: np.ndarray, width: int) -> float:
    """About how many entries the rows cut into the background keep."""
    rest = ~direct
    if rule == COUNT:
        return float(rest.sum() * min(target, width))
    if not np.isfinite(target):
        return float(rest.sum() * width)
    background = np.maximum(found.background[rest], 1e-300)
    needed = np.ceil((target - found.mass[rest]) / background) + found.count[rest]
    return float(np.minimum(needed, width).sum())


def select_matrix(P, rule: int, target: float) -> sp.csr_array:
    """Every row of ``P`` (any format, shape (n, m)) selected and renormalised, as CSR.

    Returns a ``csr_array`` with sorted indices and no stored zeros; row ``i``
    is ``select_vector(P[i], rule, target)``. Raises ``ValueError`` before the
    work when a structured matrix's cuts reach so far into its background that
    the result would exceed ``MAX_ENTRIES``.
    """
    P = as_operator(P, "P")
    n, m = P.shape
    found = peaks(P)
    direct = None
    if found is not None:
        direct = _decided(rule, target, found)
        estimate = _estimate(rule, target, found, direct, m)
        if estimate > MAX_ENTRIES:
            raise ValueError(
                f"the selection would keep about {estimate:.3g} entries: in "
                f"{int((~direct).sum())} rows the peaks do not decide it and the cut reaches "
                "the background; choose a smaller setting"
            )
    blocks = row_blocks(P, direct)
    counts, ties = np.empty(n, np.int64), np.empty(n, np.int64)
    level, mass = np.empty(n), np.empty(n)
    edges = [0]
    kept_from_cut = {}  # block number -> (indices, data) of a generated block
    for number, make in enumerate(blocks):
        block = make()
        _check_rows(block.entries())
        rows = slice(edges[-1], edges[-1] + block.n_rows)
        block.cut(rule, target, counts[rows], level[rows], ties[rows], mass[rows])
        if block.generated:
            size = int(counts[rows].sum())
            part = np.empty(size, np.int32 if m < 2**31 else np.int64), np.empty(size)
            block.fill(level[rows], ties[rows], mass[rows], *part)
            kept_from_cut[number] = part
        edges.append(rows.stop)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    if indptr[-1] > MAX_ENTRIES:
        raise ValueError(
            f"the selection keeps {indptr[-1]:.3g} entries, more than {MAX_ENTRIES:.3g}; "
            "choose a smaller setting"
        )
    index_dtype = np.int32 if max(m, indptr[-1]) < 2**31 else np.int64
    indices, data = np.empty(indptr[-1], index_dtype), np.empty(indptr[-1])
    for number, (start, stop) in enumerate(itertools.pairwise(edges)):
        rows, entries = slice(start, stop), slice(indptr[start], indptr[stop])
        if number in kept_from_cut:
            indices[entries], data[entries] = kept_from_cut.pop(number)
        else:
            block = blocks[number]()
            block.fill(level[rows], ties[rows], mass[rows], indices[entries], data[entries])
    matrix = sp.csr_array((data, indices, indptr.astype(index_dtype)), shape=(n, m))
    matrix.has_sorted_indices = True
    return matrix


def kept_mass(P, Q: sp.csr_array) -> np.ndarray:
    """The mass of each row of ``P`` that its selected row ``Q`` keeps, shape (n,).

    ``sum_{j: Q[i, j] > 0} P[i, j]``. Since ``Q[i]`` is ``P[i]`` restricted to
    the kept set and renormalised, ``1 - kept_mass[i]`` is ``TV(P[i], Q[i])``
    (the proof of Theorem 4.1). ``P`` is any format.
    """
    rows = entry_rows(Q.indptr)
    values = entries_at(as_operator(P, "P"), rows, Q.indices)
    return np.bincount(rows, weights=values, minlength=Q.shape[0])


def selected(hmm: HMM, top: HMM) -> Approximation:
    """The approximation of ``hmm`` by ``top``, whose prior and transition rows are
    selections of ``hmm``'s: each error is one minus the kept mass (``kept_mass``), the
    prior's at least 0 (a prior summing to 1 within rounding may keep a mass just above 1)."""
    return Approximation(
        top,
        prune=1.0,
        prior_error=max(0.0, float(1.0 - hmm.prior[top.prior > 0].sum())),
        row_error=1.0 - kept_mass(hmm.transition, top.transition),
    )


def transitions_alone(hmm: HMM, transition) -> Approximation:
    """The approximation of ``hmm`` that replaces only its transitions, by ``transition`` (a
    selection of each row, (n_states, n_states)): prior and emissions stay the exact ones, so
    the prior error is 0 and the row errors are ``selected``'s."""
    return selected(hmm, HMM(hmm.prior, transition, hmm.emission))


__all__ = [
    "COUNT",
    "MASS",
    "count_target",
    "kept_mass",
    "mass_target",
    "select_matrix",
    "select_vector",
    "selected",
    "transitions_alone",
]
