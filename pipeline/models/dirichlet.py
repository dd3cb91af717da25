"""Random HMMs with symmetric-Dirichlet rows: the tunable family for sweeps.

A small concentration ``alpha`` gives peaked rows (top-p keeps few entries and
pays off), a large one gives nearly uniform rows (top-p keeps almost all).
Rows are drawn in chunks of about ``CHUNK_ENTRIES`` entries from generators
seeded by ``(seed, stream, chunk)``, so any row block can be regenerated on its
own, with the same values whatever block size asks for it.
"""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM
from pipeline.models.family import ParameterError

CHUNK_ENTRIES = 2**20
PRIOR, TRANSITION, EMISSION = 0, 1, 2
"""Stream ids that keep the prior, transition and emission draws independent."""


def dirichlet_rows(
    seed: int, stream: int, start: int, stop: int, width: int, alpha: float
) -> np.ndarray:
    """Rows ``start:stop`` of a stream of Dirichlet(alpha, ..., alpha) rows.

    Returns
    -------
    ndarray, shape (stop - start, width)
        Each row a draw from the symmetric Dirichlet of dimension ``width``;
        the same rows whatever block they are requested in.
    """
    chunk_rows = max(1, CHUNK_ENTRIES // width)
    first, last = start // chunk_rows, (stop - 1) // chunk_rows
    chunks = []
    for chunk in range(first, last + 1):
        rng = np.random.default_rng([seed, stream, chunk])
        # Rows are drawn one after the other, so a chunk's first rows do not depend on
        # how many follow: draw only up to the last row asked for.
        n_rows = min(chunk_rows, stop - chunk * chunk_rows)
        chunks.append(rng.dirichlet(np.full(width, alpha), size=n_rows))
    rows = np.concatenate(chunks)
    offset = start - first * chunk_rows
    return rows[offset : offset + stop - start]


def check(n_states: int, *, alpha: float = 0.1, n_observations: int | None = None) -> None:
    """Raise ``ParameterError`` unless ``alpha > 0`` and ``n_observations`` is None or >= 1."""
    if not alpha > 0:
        raise ParameterError("alpha", f"the dirichlet family needs alpha > 0, got alpha={alpha}")
    if n_observations is not None and n_observations < 1:
        raise ParameterError(
            "n_observations",
            f"the dirichlet family needs n_observations >= 1, got {n_observations}",
        )


def build(
    n_states: int, seed: int = 0, *, alpha: float = 0.1, n_observations: int | None = None
) -> HMM:
    """A random HMM whose prior, transition rows and emission rows are Dirichlet(alpha) draws.

    Parameters
    ----------
    n_states : int
        Number of states ``n``.
    seed : int
        Seed of every draw.
    alpha : float
        Symmetric concentration, > 0; small values give peaked rows.
    n_observations : int, optional
        Number of observation symbols; defaults to ``n_states`` as in the paper's models.
    """
    check(n_states, alpha=alpha, n_observations=n_observations)
    m = n_states if n_observations is None else n_observations
    prior = dirichlet_rows(seed, PRIOR, 0, 1, n_states, alpha)[0]
    transition = dirichlet_rows(seed, TRANSITION, 0, n_states, n_states, alpha)
    emission = dirichlet_rows(seed, EMISSION, 0, n_states, m, alpha)
    return HMM(prior, transition, emission)
