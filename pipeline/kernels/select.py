"""Row selection kernels: the top-p set (a mass to reach) or the top-k set (a count).

Both rules follow Algorithm 1's order: probabilities descending, ties broken by
the lower index first. ``MASS`` keeps the shortest prefix of that order whose
mass reaches the target; ``COUNT`` keeps its first ``k`` non-zero entries. A
mass-weighted (or count-weighted) quickselect finds the cut in expected linear
time: every entry above the cut's value is kept, and entries tied at it are
taken in index order. Only when a sum within rounding of the target could cut
among the entries above the tie level does a full sort of the row's non-zero
entries decide, to follow the order exactly.

A row block is selected in two passes: ``cut_*`` records, per row, the kept
count, the smallest kept value (``level``), how many kept entries equal it
(``ties``) and the kept mass; ``fill_*`` then writes each row's kept columns
and renormalised values in one scan. By the prefix property of the order, the
kept set is every entry above ``level`` and the first ``ties`` equal to it.

A caller's ``p`` or ``k`` becomes a rule's target through ``mass_target`` or
``count_target``, the one check in this package: the rules and what reaching them means
(``TOLERANCE``) stay in one place for top-p and top-k (``pipeline.methods``) and for
belief pruning (``prune``, run by ``pipeline.inference``).

Its namesake ``pipeline.methods.select`` builds the truncated matrices from these kernels'
choices.
"""

from __future__ import annotations

import numba
import numpy as np

MASS = 0
"""Rule: keep the shortest prefix whose mass reaches the target (top-p)."""
COUNT = 1
"""Rule: keep the first ``k`` non-zero entries of the order (top-k)."""

SELECTION_MARGIN = 1e-9
"""The mass quickselect aims this far past the target so its differently ordered sums
never cut short."""

TOLERANCE = 1e-12
"""A prefix whose mass is at least ``p - TOLERANCE`` reaches ``p``, so that sums that
equal ``p`` in exact arithmetic (the paper's examples) do."""

NUMBER = (int, float, np.integer, np.floating)
"""The types a mass or a count may have (a tuple: ``isinstance`` reads it faster than a union)."""


def mass_target(p, name: str = "p") -> float:
    """The mass a top-p prefix must reach; ``inf`` for ``p = 1`` (keep every non-zero entry).

    Raises ``TypeError``/``ValueError`` naming ``name`` unless ``p`` is a number in (0, 1].
    """
    if isinstance(p, bool) or not isinstance(p, NUMBER):
        raise TypeError(f"{name} must be a number in (0, 1], got {p!r}")
    if not 0 < p <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {p}")
    return np.inf if p == 1 else float(p) - TOLERANCE


def count_target(k, name: str = "k") -> float:
    """The count a top-k set keeps, as the kernels take it.

    Raises ``TypeError``/``ValueError`` naming ``name`` unless ``k`` is an integer >= 1.
    """
    if isinstance(k, bool) or not isinstance(k, NUMBER):
        raise TypeError(f"{name} must be an integer >= 1, got {k!r}")
    if not (k >= 1 and float(k).is_integer()):
        raise ValueError(f"{name} must be an integer >= 1, got {k}")
    return float(k)


@numba.njit(cache=True, nogil=True)
def _median3(a, b, c):
    if a < b:
        a, b = b, a
    if b < c:
        b = c
    return a if a < b else b


@numba.njit(cache=True, nogil=True)
def _select(values, work, m, goal, count):
    """Weighted three-way quickselect on ``work[:m]`` (positions into ``values``).

    Each entry weighs its value, or 1 with ``count``. Reorders ``work[:m]`` so
    that ``work[:greater]`` hold values above a threshold ``x`` and
    ``work[greater:equal]`` the values equal to it, where the prefix
    ``work[:equal]`` weighs at least ``goal`` and ``work[:greater]`` less.
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
                above += 1.0 if count else v
                a += 1
                i += 1
            elif v < x:
                b -= 1
                work[i], work[b] = work[b], work[i]
            else:
                level += 1.0 if count else v
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
def _mark_ties(values, level, mark, k, mass, target, count):
    """Mark entries equal to ``level`` in index order until the rule is met; return (k, mass)."""
    for j in range(values.size):
        if (count and k >= target) or (not count and mass >= target):
            break
        if values[j] == level:
            mark[j] = True
            mass += level
            k += 1
    return k, mass


@numba.njit(cache=True, nogil=True)
def kept(values, rule, target, work, mark):
    """The kept set of one row under ``rule``.

    ``values`` (d,) are non-negative. ``target`` is the mass to reach for
    ``MASS`` (above 1: every non-zero entry, as p = 1 keeps) or the count
    ``k`` for ``COUNT``. ``work`` (int64) and ``mark`` (bool, all False) are
    scratch of length >= d. Writes the kept positions, ascending, to
    ``work[:k]``, leaves ``mark`` all False and returns ``(k, mass)`` with
    ``mass`` the kept set's total.
    """
    d = values.size
    m = 0
    for j in range(d):
        if values[j] > 0:
            work[m] = j
            m += 1
    count = rule == COUNT
    if (count and target >= m) or (not count and target > 1.0):  # every non-zero entry
        mass = 0.0
        for j in range(m):
            mass += values[work[j]]
        return m, mass
    goal = target if count else target + SELECTION_MARGIN
    greater, equal = _select(values, work, m, goal, count)
    mass, smallest = 0.0, np.inf
    for j in range(greater):
        mass += values[work[j]]
        smallest = min(smallest, values[work[j]])
    if not count and greater > 0 and mass - smallest >= target - SELECTION_MARGIN:
        # The cut may fall inside the entries above the tie level: sort them all.
        k, mass = _mark_sorted_prefix(values, work, m, target, mark)
    else:
        # Every entry above the tie level is kept; ties are taken by lower index first.
        k = greater
        for j in range(greater):
            mark[work[j]] = True
        if equal > greater:
            k, mass = _mark_ties(values, values[work[greater]], mark, k, mass, target, count)
        if not count and mass < target and equal < m:  # the quickselect's rounding fell short
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
def _record(row, rule, target, work, mark, r, counts, level, ties, mass):
    """Select row ``r`` and record its cut (see the module docstring)."""
    k, mass[r] = kept(row, rule, target, work, mark)
    smallest, equal = np.inf, 0
    for j in range(k):
        value = row[work[j]]
        if value < smallest:
            smallest, equal = value, 1
        elif value == smallest:
            equal += 1
    counts[r], level[r], ties[r] = k, smallest, equal


@numba.njit(cache=True, nogil=True)
def cut_dense(rows, rule, target, counts, level, ties, mass):
    """First pass over a dense row block ``rows`` (r, d): each row's cut."""
    work = np.empty(rows.shape[1], np.int64)
    mark = np.zeros(rows.shape[1], np.bool_)
    for r in range(rows.shape[0]):
        _record(rows[r], rule, target, work, mark, r, counts, level, ties, mass)


@numba.njit(cache=True, nogil=True)
def cut_csr(indptr, data, rule, target, counts, level, ties, mass):
    """First pass over a CSR row block (``indptr``, ``data``): each row's cut among its entries."""
    width = 0
    for r in range(indptr.size - 1):
        width = max(width, indptr[r + 1] - indptr[r])
    work = np.empty(width, np.int64)
    mark = np.zeros(width, np.bool_)
    for r in range(indptr.size - 1):
        row = data[indptr[r] : indptr[r + 1]]
        _record(row, rule, target, work, mark, r, counts, level, ties, mass)


@numba.njit(cache=True, nogil=True)
def _fill_row(row, columns, cut, left, total, indices, data, position):
    """Write the kept entries of one row from ``position``; return the next position."""
    for j in range(row.size):
        value = row[j]
        if value < cut:
            continue
        if value == cut:
            if left == 0:
                continue
            left -= 1
        indices[position] = columns[j]
        data[position] = value / total
        position += 1
    return position


@numba.njit(cache=True, nogil=True)
def fill_dense(rows, level, ties, mass, indices, data):
    """Second pass over a dense row block: kept columns and renormalised values, row after row."""
    columns = np.arange(rows.shape[1])
    position = 0
    for r in range(rows.shape[0]):
        position = _fill_row(rows[r], columns, level[r], ties[r], mass[r], indices, data, position)


@numba.njit(cache=True, nogil=True)
def fill_csr(indptr, in_indices, in_data, level, ties, mass, indices, data):
    """Second pass over a CSR row block (``fill_dense`` for stored entries)."""
    position = 0
    for r in range(indptr.size - 1):
        start, stop = indptr[r], indptr[r + 1]
        position = _fill_row(
            in_data[start:stop],
            in_indices[start:stop],
            level[r],
            ties[r],
            mass[r],
            indices,
            data,
            position,
        )


@numba.njit(cache=True, nogil=True)
def prune(belief, target, work, mark):
    """Keep the top-p states of ``belief`` (mass ``target``) in place, renormalised.

    ``work`` and ``mark`` as in ``kept``. Returns the mass removed, ``1 -`` the
    kept mass for a belief summing to 1 (0 when ``target`` is above 1).
    """
    if target > 1.0:
        return 0.0
    total = 0.0
    for i in range(belief.size):
        total += belief[i]
    k, mass = kept(belief, MASS, target * total, work, mark)
    if mass <= 0.0:
        return 0.0
    next_kept = 0
    for i in range(belief.size):
        if next_kept < k and work[next_kept] == i:
            belief[i] /= mass
            next_kept += 1
        else:
            belief[i] = 0.0
    return (total - mass) / total
