"""Error metrics and bounds of the top-p paper (Section 4), as pure array functions.

- ``total_variation``: Definition 5;
- ``minimal_mixing_rate``: gamma of Definition 6 (Boyen and Koller), exactly;
- ``doeblin_lower_bound``: a cheap lower bound on gamma;
- ``error_bounds``: the bounds on the prediction error of any approximation
  whose steps each add at most ``eps`` in TV (Theorem 4.1's role), by
  Corollary 1, Theorem 4.3 and the recursion behind it; ``tv_bounds``: the
  same in the paper's terms, for top-p with ``eps = 1 - p``;
- ``tv_certificate``: the online bound from an approximate run's own errors;
- ``sparsity``: the fraction of zero entries.

Every matrix may be in any format of ``pipeline.operators``. A transition matrix's NaN,
infinite or negative entry, or a distribution's NaN or infinite one, is a one-line
``ValueError`` naming it, never a number: gamma would come out 1 (the tightest bound) or
0, a TV distance NaN.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from pipeline import operators


def _finite(values, name: str) -> np.ndarray:
    """``values`` as float64; ``ValueError`` naming the first entry that is not finite."""
    values = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        where = ", ".join(str(int(k)) for k in np.argwhere(bad)[0])
        raise ValueError(
            f"{name}[{where}] = {values[bad][0]}; a distribution's entries must be finite"
        )
    return values


def _transition(T):
    """``T`` in its canonical format (``pipeline.operators.as_operator``); ``ValueError``
    naming its first NaN, infinite or negative entry (``pipeline.operators.check_entries``)."""
    T = operators.as_operator(T, "T")
    operators.check_entries(T, "T")
    return T


def _least_overlap(T, part: int, parts: int) -> float:
    """``mixing_rate_part`` of a checked matrix."""
    return operators.least_overlap(T, np.arange(part, T.shape[0] - 1, parts))


def total_variation(P, Q) -> np.ndarray:
    """Total variation distance ``0.5 * sum_x |P(x) - Q(x)|`` along the last axis.

    ``P`` and ``Q`` are arrays of distributions whose shapes broadcast, e.g.
    ``(horizon + 1, n_states)`` each; the result drops the last axis. ``ValueError`` names
    the first entry that is NaN or infinite.
    """
    P, Q = _finite(P, "P"), _finite(Q, "Q")
    return 0.5 * np.abs(P - Q).sum(-1)


def mixing_rate_part(T, part: int, parts: int) -> float:
    """The least row overlap over pairs ``(i, k > i)`` with ``i % parts == part``.

    The minimum over ``part = 0..parts-1`` is gamma; parts are balanced
    (interleaved rows), so threads or Dask tasks can each take one. ``ValueError`` names
    the first NaN, infinite or negative entry of ``T``.
    """
    return _least_overlap(_transition(T), part, parts)


def minimal_mixing_rate(T, *, threads: int | None = None) -> float:
    """The minimal mixing rate ``gamma = min_{i != k} sum_j min(T[i, j], T[k, j])``.

    It is the least probability mass two different rows agree on, and equals
    one minus the Dobrushin ergodicity coefficient. Exact: every pair of rows
    is considered, pruned only once it provably cannot be the minimum.

    Parameters
    ----------
    T : ndarray, scipy sparse matrix or SparsePlusRankOne, shape (n, n), n >= 2
        Row-stochastic transition matrix.
    threads : int, optional
        Threads sharing the row pairs (``mixing_rate_part``); default the CPU count.

    Returns
    -------
    float in [0, 1]
        Clipped to 1 against rounding (the uniform matrix sums to 1 + 2e-16).

    Raises ``ValueError`` naming the first NaN, infinite or negative entry.
    """
    T = _transition(T)
    n = T.shape[0]
    if T.ndim != 2 or n < 2:
        raise ValueError(f"minimal_mixing_rate needs a matrix with >= 2 rows, got shape {T.shape}")
    threads = max(1, min(threads or os.cpu_count() or 1, n - 1))
    with ThreadPoolExecutor(threads) as pool:
        gamma = min(pool.map(lambda part: _least_overlap(T, part, threads), range(threads)))
    return float(min(gamma, 1.0))  # rows summing to 1 + rounding can give 1 + 1e-16


def doeblin_lower_bound(T) -> float:
    """``sum_j min_i T[i, j]``: the mass every row shares, a lower bound on gamma.

    Costs one pass over ``T`` (any format, shape (n, n)): O(nnz + n) for a
    structured matrix, so it serves where gamma costs too much. Clipped to 1
    against rounding, as gamma is (the uniform matrix gives 1 + 4e-16). ``ValueError`` names
    the first NaN, infinite or negative entry.
    """
    return min(1.0, operators.shared_mass(_transition(T)))


def tv_certificate(gamma: float, errors) -> np.ndarray:
    """An error bound for approximate prediction computed from the approximate run alone.

    ``e_0 = errors[0]`` and ``e_t = (1 - gamma) e_{t-1} + errors[t]`` bound
    ``TV(P_t, Q_t)``: the error of step ``t - 1`` contracts by ``1 - gamma``
    (Theorem 4.2) and step ``t`` adds at most ``errors[t]`` (``step_errors``).

    Parameters
    ----------
    gamma : float
        The minimal mixing rate of the exact transitions, or a lower bound on it.
    errors : ndarray, shape (T,)
        The most TV each step adds: the prior's error at ``t = 0``.

    Returns
    -------
    ndarray, shape (T,)
    """
    errors = np.asarray(errors, dtype=np.float64)
    bound = np.empty(errors.size)
    bound[0] = errors[0]
    for t in range(1, errors.size):
        bound[t] = (1.0 - gamma) * bound[t - 1] + errors[t]
    return np.clip(bound, 0.0, 1.0)


def step_errors(prior_error: float, row_error, beliefs, pruned, *, previous=None) -> np.ndarray:
    """The most TV each step of an approximate prediction run adds, shape (T,).

    Step ``t >= 1`` advances ``Q_{t-1}`` with rows off by ``eps_i = TV(T_i, Q_i)``,
    adding at most ``sum_i Q_{t-1}(i) eps_i``, then prunes ``pruned[t]`` of the
    belief's mass, adding exactly that; step 0 adds the prior's error and its pruning.

    Parameters
    ----------
    prior_error : float
        ``TV`` between the exact and the approximate prior.
    row_error : ndarray, shape (n_states,)
        ``eps_i`` of each transition row.
    beliefs : ndarray, shape (T, n_states)
        The approximate run's beliefs ``Q_t``.
    pruned : ndarray, shape (T,)
        The mass belief pruning removed at each step (zeros without pruning).
    previous : ndarray, shape (n_states,), optional
        The belief of the step before ``beliefs[0]``, where these are later steps of a run
        (taken chunk by chunk): then ``beliefs[0]`` too is a transition's step.
    """
    errors = np.asarray(pruned, dtype=np.float64).copy()
    beliefs, row_error = np.asarray(beliefs), np.asarray(row_error)
    if previous is None:
        errors[0] += prior_error
        errors[1:] += beliefs[:-1] @ row_error
    else:
        errors += np.vstack([previous, beliefs[:-1]]) @ row_error
    return errors


def error_bounds(eps: float, gamma: float, t, *, start=None) -> dict[str, np.ndarray]:
    """Upper bounds on the prediction error ``TV(P_t, Q_t)`` of an approximation.

    Holds for any approximate run whose every step adds at most ``eps`` in TV
    to the exact step's error and whose start is off by at most ``start``:
    top-p with ``eps = 1 - p`` is the paper's case (``tv_bounds``); any
    method's measured ``max_i TV(T_i, Q_i)`` (plus ``1 - p`` for belief
    pruning) is another.

    Parameters
    ----------
    eps : float in [0, 1]
        The most TV one step adds.
    gamma : float in [0, 1]
        The minimal mixing rate of the exact transition matrix (or a lower bound).
    t : int or array_like of int
        Time steps (0 is the prior).
    start : float in [0, 1], optional
        The error at step 0; default ``eps``.

    Returns
    -------
    dict of ndarray, each of ``t``'s shape
        ``single_step`` (Theorem 4.1): ``eps``;
        ``linear`` (Corollary 1): ``start + t eps``;
        ``mixing`` (Theorem 4.3): ``max(start, eps) / gamma``, ``inf`` when gamma = 0;
        ``recursive``: ``e_t = (1 - gamma) e_{t-1} + eps`` from ``e_0 = start``,
        i.e. ``(1 - gamma)^t start + eps sum_{i<t} (1 - gamma)^i``, capped by
        ``linear`` and ``mixing``.
    """
    t = np.asarray(t)
    if not np.issubdtype(t.dtype, np.integer) or (t < 0).any():
        raise ValueError("t must hold non-negative integer time steps")
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    start = eps if start is None else start
    for name, value in (("eps", eps), ("start", start)):
        if not 0 <= value <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    steps = (t + 1).astype(np.float64)
    # Written as the paper's sums plus a correction that vanishes when start == eps, so
    # that top-p's bounds come out exactly as (t + 1)(1 - p) and (1 - p) sum_{i<=t} (1-gamma)^i.
    linear = steps * eps + (start - eps)
    if gamma > 0:
        mixing = np.full(t.shape, max(start, eps) / gamma)
        if gamma < 1:
            # sum_{i=0..t} (1 - gamma)^i = (1 - (1 - gamma)^(t+1)) / gamma, without cancellation
            geometric = -np.expm1(steps * np.log1p(-gamma)) / gamma
            decay = np.exp(t * np.log1p(-gamma))  # (1 - gamma)^t
        else:
            geometric, decay = np.ones(t.shape), (t == 0).astype(np.float64)
        recursive = np.minimum(eps * geometric + (start - eps) * decay, np.minimum(linear, mixing))
    else:
        mixing = np.full(t.shape, np.inf)
        recursive = linear.copy()
    return {
        "single_step": np.full(t.shape, float(eps)),
        "linear": linear,
        "mixing": mixing,
        "recursive": recursive,
    }


def tv_bounds(p, gamma, t) -> dict[str, np.ndarray]:
    """Upper bounds on ``TV(P_t, Q_t)`` between an HMM and its top-p HMM, for prediction.

    ``error_bounds`` with ``eps = 1 - p`` (Theorem 4.1) for every step and the prior:
    ``single_step`` ``1 - p``; ``linear`` ``(t + 1)(1 - p)`` (Corollary 1);
    ``mixing`` ``(1 - p) / gamma`` (Theorem 4.3); ``recursive``
    ``(1 - p) sum_{i=0..t} (1 - gamma)^i``.
    """
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    return error_bounds(1.0 - p, gamma, t)


def sparsity(M) -> float:
    """The fraction of zero entries of a matrix in any format (explicit zeros count as zero)."""
    M = operators.as_operator(M, "M")
    return 1.0 - operators.count_nonzero(M) / np.prod(M.shape)
