"""HMM LM parameterisations and the gradient of the log evidence in each.

Every parameterisation has prior logits (n,) and emission logits (n, V) with a
softmax per row; the transitions are either

- ``Softmax``: free logits (n, n), a softmax per row: O(n^2) per step;
- ``Neural``: the logits ``h_i . e_j`` of state embeddings through a residual MLP, a
  softmax per row (``pipeline.hmmlm.neural``): O(n^2) per step, O(n d) parameters;
- ``Kernel``: the generalised softmax of Chiu, Deng, Rush ("Scaling Hidden Markov
  Language Models") ``T = diag(1/z) phi(U) phi(V)^T`` with
  ``phi(u) = exp(W u - |u|^2 / 2)``, embeddings ``U``, ``V`` (n, d) and features
  ``W`` (F, d), O(n F) per step; with ``band`` logits (n, 2 delta - 1) the
  entries ``|i - j| < delta`` are ``exp(band) / z`` instead, normalised together
  with the kernel (Section 7), O(n (F + delta)) per step.

``transition_gradient`` contracts the gradient with respect to the matrix,
``before.T @ after`` (``pipeline.hmmlm.evidence``), in the parameterisation's
own cost: O(N n^2) for the softmax, O(N n (F + delta)) for the kernel, with N
the transitions of the batch.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

from pipeline.hmmlm import neural
from pipeline.hmmlm.evidence import Statistics
from pipeline.hmmlm.neural import Neural
from pipeline.operators import LowRank, batch_products, entry_rows
from pipeline.operators.lowrank import band_pattern


class Softmax(NamedTuple):
    logits: np.ndarray  # (n, n)


class Kernel(NamedTuple):
    U: np.ndarray  # (n, d)
    V: np.ndarray  # (n, d)
    W: np.ndarray  # (F, d)
    band: np.ndarray  # (n, 2 delta - 1) logits of the offsets -delta + 1 .. delta - 1; (n, 0): none


Transition = Softmax | Kernel | Neural
"""The transition parameters of any parameterisation."""


class Parameters(NamedTuple):
    prior: np.ndarray  # (n,) logits
    emission: np.ndarray  # (n, V) logits; flat (k V,) by cluster for a blocked model
    transition: Transition


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Each row of ``logits`` as a distribution."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def softmax_in_place(X: np.ndarray) -> np.ndarray:
    """Each row of ``X`` (m, n) replaced by its softmax, in place, with numpy's vectorised
    ``np.exp`` (each row's total summed in float64); returns ``X``."""
    X -= X.max(axis=1, keepdims=True)
    np.exp(X, out=X)
    X /= X.sum(axis=1, dtype=np.float64, keepdims=True).astype(X.dtype)
    return X


def _band_positions(n: int, width: int) -> tuple[sp.csr_array, np.ndarray]:
    """The band pattern of ``width = 2 delta - 1`` offsets as CSR, and which (row, offset)
    of an (n, width) array each of its entries is (a boolean mask, row-major order)."""
    delta = (width + 1) // 2
    pattern = band_pattern(n, delta)
    column = np.arange(n)[:, None] + np.arange(-delta + 1, delta)[None, :]
    return pattern, (column >= 0) & (column < n)


class KernelParts(NamedTuple):
    """The kernel's intermediate arrays, kept for its gradient."""

    T: LowRank
    L: np.ndarray  # (n, F) phi(U), scaled per row
    R: np.ndarray  # (n, F) phi(V), scaled overall
    z: np.ndarray  # (n,) row normalisers of L, R and the band at these scales
    valid: np.ndarray  # (n, width) which band logits are in the matrix


@numba.njit(cache=True, nogil=True, fastmath=True)
def _exp_below_max(X):
    """``X = exp(X - max of its row)`` in place; returns the maxima (m,)."""
    m, F = X.shape
    top = np.empty(m)
    for i in range(m):
        high = X[i, 0]
        for f in range(1, F):
            high = max(high, X[i, f])
        for f in range(F):
            X[i, f] = np.exp(X[i, f] - high)
        top[i] = high
    return top


def features(E: np.ndarray, W: np.ndarray, out=None) -> tuple[np.ndarray, np.ndarray]:
    """``phi(E) = exp(E W^T - |E|^2 / 2)`` (m, F) over a shift per row, and the shifts (m,)
    (``phi(E)_i = features_i exp(shift_i)``), in the dtype of ``E`` (into ``out`` if given)."""
    X = np.matmul(E, W.T, out=out)
    top = _exp_below_max(X)
    return X, (top - half_square(E)).astype(E.dtype)


def half_square(E: np.ndarray) -> np.ndarray:
    """``|e|^2 / 2`` of each row of ``E`` (m,), summed in float64."""
    return 0.5 * np.sum(E.astype(np.float64) ** 2, axis=1)


def kernel_parts(p: Kernel) -> KernelParts:
    """The transition matrix of ``p`` as a ``LowRank`` and what its gradient reuses."""
    n = p.U.shape[0]
    L, shift_u = features(p.U, p.W)
    R, shift_v = features(p.V, p.W)
    R *= np.exp(shift_v - shift_v.max())[:, None]  # one overall scale: the rows of T keep theirs
    pattern, valid = _band_positions(n, p.band.shape[1])
    rows = entry_rows(pattern.indptr)
    product = np.einsum("kf,kf->k", L[rows], R[pattern.indices])
    # exp(band) at the scales of L and R: both are divided by exp(shift_u_i + max shift_v).
    raw = np.exp(p.band[valid] - shift_u[rows] - shift_v.max())
    z = L @ R.sum(axis=0) + np.bincount(rows, weights=raw - product, minlength=n)
    band = sp.csr_array((raw / z[rows], pattern.indices, pattern.indptr), shape=(n, n))
    return KernelParts(LowRank(L / z[:, None], R, band), L, R, z, valid)


def transition_matrix(p: Softmax | Kernel | Neural):
    """The row-stochastic transition matrix: dense for ``Softmax`` and ``Neural``, ``LowRank``
    for ``Kernel``."""
    if isinstance(p, Neural):
        return neural.transition_matrix(p)
    return softmax_rows(p.logits) if isinstance(p, Softmax) else kernel_parts(p).T


def _softmax_gradient(p: Softmax, s: Statistics) -> Softmax:
    T = softmax_rows(p.logits)
    G = s.before.T @ s.after
    h = np.einsum("ij,ij->i", G, T)
    return Softmax(T * (G - h[:, None]))


def _kernel_gradient(p: Kernel, s: Statistics) -> Kernel:
    parts = kernel_parts(p)
    T, L, R, z = parts.T, parts.L, parts.R, parts.z
    A, Gam = s.before, s.after
    h = np.einsum("ki,ki->i", A, batch_products(T).backward(Gam))  # h_i = sum_j G_ij T_ij
    Lz = T.left
    # The band, diagonal by diagonal (offset o: entries (i, i + o)): G there, and the sums
    # over each row's and each column's band that the kernel's entries leave out.
    n, width = p.band.shape
    values = np.zeros((n, width))
    values[parts.valid] = T.band.data
    g_band = np.zeros((n, width))
    band_R, g_band_R, band_d_R = np.zeros_like(L), np.zeros_like(L), np.zeros_like(R)
    for k in range(width):
        o = k - (width - 1) // 2
        lo, hi = max(0, -o), min(n, n - o)  # the rows i with 0 <= i + o < n
        g = np.einsum("ki,ki->i", A[:, lo:hi], Gam[:, lo + o : hi + o])
        g_band[lo:hi, k] = g
        band_R[lo:hi] += R[lo + o : hi + o]
        g_band_R[lo:hi] += g[:, None] * R[lo + o : hi + o]
        band_d_R[lo + o : hi + o] += (h[lo:hi] - g)[:, None] * Lz[lo:hi]
    # d log P / d L_i: through the kernel entries off the band and through z_i.
    d_L = (A.T @ (Gam @ R) - g_band_R - h[:, None] * (R.sum(axis=0) - band_R)) / z[:, None]
    # d log P / d R_j: through the entries of column j off the band and through every z_i.
    d_R = Gam.T @ (A @ Lz) - Lz.T @ h + band_d_R
    dX, dY = d_L * L, d_R * R
    return Kernel(
        dX @ p.W - dX.sum(axis=1, keepdims=True) * p.U,
        dY @ p.W - dY.sum(axis=1, keepdims=True) * p.V,
        dX.T @ p.U + dY.T @ p.V,
        values * (g_band - h[:, None]),
    )


def gradient(p: Parameters, s: Statistics, n_sequences: int) -> Parameters:
    """The gradient of the batch's log evidence (``statistics`` of ``n_sequences``
    sequences) with respect to every parameter of ``p``."""
    prior = softmax_rows(p.prior)
    emission = softmax_rows(p.emission)
    if isinstance(p.transition, Neural):
        transition: Transition = neural.gradient(p.transition, s.before.T @ s.after)
    elif isinstance(p.transition, Softmax):
        transition = _softmax_gradient(p.transition, s)
    else:
        transition = _kernel_gradient(p.transition, s)
    return Parameters(
        s.posterior_start - n_sequences * prior,
        s.emission_counts - s.emission_counts.sum(axis=1, keepdims=True) * emission,
        transition,
    )


PARAMETERISATIONS = (
    "softmax, neural, kernel_<r> or banded_kernel_<r> (r states per feature, r >= 1)"
)
"""The names of the parameterisations a training grid takes."""


def parse(name: str, n_states: int, max_features: int | None = None) -> tuple[str, int, bool]:
    """``(kind, n_features, banded)`` of a parameterisation name for ``n_states`` states,
    a kernel's features ``n_states / r`` capped at ``max_features`` (None: no cap);
    ``ValueError`` (one line) for a name that is not one of ``PARAMETERISATIONS``."""
    if name in ("softmax", "neural"):
        return name, 0, False
    banded = name.startswith("banded_kernel_")
    prefix = "banded_kernel_" if banded else "kernel_"
    ratio = name.removeprefix(prefix)
    if not name.startswith(prefix) or not ratio.isdigit() or int(ratio) < 1:
        raise ValueError(f"unknown parameterisation {name!r}; allowed: {PARAMETERISATIONS}")
    if int(ratio) > n_states:
        raise ValueError(f"{name} needs at least {ratio} states (one feature), got {n_states}")
    features = n_states // int(ratio)
    return "kernel", features if max_features is None else min(features, max_features), banded


def initial(
    kind: str,
    n_states: int,
    n_tokens: int,
    *,
    n_features: int = 0,
    delta: int = 0,
    dim: int = 32,
    seed: int = 0,
    emission_size: int | None = None,
    dtype=np.float64,
) -> Parameters:
    """Random starting parameters: ``kind`` is ``softmax``, ``neural`` or ``kernel`` (with a
    band of ``delta`` when ``delta > 0``); small random logits, embeddings of scale
    1/sqrt(d).
    ``emission_size``: flat emission logits of that many entries (a blocked model's k V)
    instead of (n_states, n_tokens)."""
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return rng.standard_normal(shape, dtype=np.float32 if dtype == np.float32 else np.float64)

    prior = 0.01 * normal(n_states)
    emission = normal(*((n_states, n_tokens) if emission_size is None else (emission_size,)))
    if kind == "softmax":
        transition: Transition = Softmax(0.01 * normal(n_states, n_states))
    elif kind == "neural":
        transition = neural.initial(n_states, dim, rng, prior.dtype)
    else:
        transition = Kernel(
            normal(n_states, dim) / np.sqrt(dim, dtype=dtype),
            normal(n_states, dim) / np.sqrt(dim, dtype=dtype),
            normal(n_features, dim),
            0.01 * normal(n_states, max(2 * delta - 1, 0)),
        )
    return Parameters(prior, emission, transition)
