"""Kernel HMMs: transitions from a generalised softmax with a finite feature map.

``T = diag(1/Z) phi(U) phi(V)^T`` with ``phi(u) = exp(W u - ||u||^2 / 2)``
(Chiu, Deng, Rush, "Scaling Hidden Markov Language Models", Section 4): state embeddings ``U``
and ``V`` (n x d), a feature matrix ``W`` (F x d), and the row normalisers
``Z_i = phi(u_i) . sum_j phi(v_j)``. With ``W``'s rows standard normal, the
kernel ``phi(u) . phi(v)`` is a positive random-feature estimate of
``F exp(u . v)`` (Performer's positive features), so the rows follow a softmax of
``u_i . v_j`` as far as rank F lets them. Embeddings are drawn with
``u . v`` of standard deviation ``1 / temperature``: a small temperature makes
peaked rows, a large one flat rows.

The matrix is a ``LowRank`` (never materialised): exact inference costs O(n F)
per step, so 10^5 to 10^6 states run on one machine. Emissions are peaked
rows over ``n_observations`` symbols (the ``peaked`` family's rows), O(n).
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.hmm import HMM
from pipeline.models.family import ParameterError
from pipeline.models.peaked import peaked_rows
from pipeline.operators import LowRank
from pipeline.operators.lowrank import MAX_DENSE

PRIOR, TRANSITION, EMISSION = 0, 1, 2
"""Stream ids that keep the prior, transition and emission draws independent."""

GAMMA_EXACT_MAX_STATES = math.isqrt(MAX_DENSE)
"""The exact minimal mixing rate materialises the matrix (``pipeline.operators.lowrank``):
above this many states (5000) the sweep uses the Doeblin lower bound."""


BLOCK_ROWS = 2**16
"""Rows of the features computed at a time: a build holds ``phi(U)``, ``phi(V)`` and the
embeddings, never an (n, F) temporary beside them."""


def features(rng: np.random.Generator, n: int, dim: int, n_features: int, temperature: float):
    """``phi(U)`` and ``phi(V)`` (n, F), each scaled by a constant per row of ``phi(U)`` and one
    overall for ``phi(V)`` (which the row normalisation cancels), so ``exp`` never overflows.
    Computed ``BLOCK_ROWS`` rows at a time: up to ``BLOCK_ROWS`` states the same numbers as
    whole arrays; above, a row's logits may differ in the last bit where the BLAS splits
    the whole product differently."""
    scale = 1.0 / np.sqrt(np.sqrt(dim) * temperature)
    U, V = (rng.standard_normal((n, dim)) * scale for _ in range(2))
    W = rng.standard_normal((n_features, dim))
    phi_u, phi_v = np.empty((n, n_features)), np.empty((n, n_features))
    blocks = [slice(start, start + BLOCK_ROWS) for start in range(0, n, BLOCK_ROWS)]
    top_v = -np.inf
    for rows in blocks:
        u, v = _logits(U[rows], W, phi_u[rows]), _logits(V[rows], W, phi_v[rows])
        u -= u.max(axis=1, keepdims=True)
        np.exp(u, out=u)
        top_v = max(top_v, v.max())
    for rows in blocks:
        v = phi_v[rows]
        v -= top_v
        np.exp(v, out=v)
    return phi_u, phi_v


def _logits(embeddings: np.ndarray, W: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``W u - ||u||^2 / 2`` of each row ``u`` of ``embeddings`` (rows, d), written to ``out``
    (rows, F)."""
    np.matmul(embeddings, W.T, out=out)
    out -= 0.5 * np.sum(embeddings**2, axis=1, keepdims=True)
    return out


def check(
    n_states: int,
    *,
    n_features: int = 64,
    dim: int = 16,
    temperature: float = 0.5,
    n_observations: int = 64,
) -> None:
    """Raise ``ParameterError`` unless n_features, dim, n_observations >= 1 (integers) and
    temperature > 0."""
    for name, value in (
        ("n_features", n_features),
        ("dim", dim),
        ("n_observations", n_observations),
    ):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ParameterError(
                name, f"the kernel family needs {name} >= 1 (an integer), got {value!r}"
            )
    if not temperature > 0:
        raise ParameterError(
            "temperature",
            f"the kernel family needs temperature > 0, got temperature={temperature}",
        )


def emission_and_prior(rng_seed: int, n_states: int, n_observations: int):
    """Peaked emission rows (4 symbols per state on a 1% background) and a uniform prior."""
    rng = np.random.default_rng([rng_seed, EMISSION])
    emission = peaked_rows(rng, n_states, n_observations, min(4, n_observations), 0.5, 0.01)
    return np.full(n_states, 1.0 / n_states), emission


def build(
    n_states: int,
    seed: int = 0,
    *,
    n_features: int = 64,
    dim: int = 16,
    temperature: float = 0.5,
    n_observations: int = 64,
) -> HMM:
    """A random kernel HMM with ``n_states`` states.

    Parameters
    ----------
    n_features : int
        The feature dimension F: the transition matrix has rank at most F.
    dim : int
        The embedding dimension d of ``U``, ``V`` and ``W``'s rows.
    temperature : float > 0
        ``u . v`` has standard deviation ``1 / temperature``: smaller is more peaked.
    n_observations : int
        Observation symbols; each state emits four of them (peaked rows).
    """
    check(
        n_states,
        n_features=n_features,
        dim=dim,
        temperature=temperature,
        n_observations=n_observations,
    )
    rng = np.random.default_rng([seed, TRANSITION])
    phi_u, phi_v = features(rng, n_states, dim, n_features, temperature)
    phi_u /= (phi_u @ phi_v.sum(axis=0))[:, None]  # the rows' normalisers 1 / Z, in place
    prior, emission = emission_and_prior(seed, n_states, n_observations)
    return HMM(prior, LowRank(phi_u, phi_v), emission)
