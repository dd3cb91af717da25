"""The ``coupled`` family: seeded, weakly coupled mixed-memory chains for sweeps.

Chain i moves by ``P(x'_i | x) = (1 - eps) A_i[x_i] + eps / (k - 1) sum_{j != i} B_ij[x_j]``
(Saul and Jordan's mixed-memory Markov model, which Thon and Kersting lift): with probability
``1 - eps`` by its own table, else by the table of another chain's state, that chain
chosen uniformly. ``eps = 0`` makes k independent chains. Every row of ``A_i``, ``B_ij``,
the priors and the emissions is a symmetric Dirichlet(``alpha``) draw, seeded by
``(seed, stream, chain, source)``, so a model is the same whatever ``eps`` or ``observe``.

Its namesake ``pipeline.models.family`` defines the interface this family has.
"""

from __future__ import annotations

import numpy as np

from pipeline.coupled.model import MAX_SET_SYMBOLS, OBSERVE, CoupledHMM
from pipeline.models.family import ParameterError

PRIOR, OWN, PAIR, EMISSION = 0, 1, 2, 3
"""Streams of the draws."""


def check(
    chains: int, n_states: int, *, eps: float, n_observations: int, observe: str, alpha: float
) -> None:
    """Raise ``ParameterError`` (one line, naming the parameter) for parameters ``build``
    rejects."""
    if isinstance(chains, bool) or int(chains) != chains or chains < 1:
        raise ParameterError("chains", f"chains must be an integer >= 1, got {chains!r}")
    if isinstance(n_states, bool) or int(n_states) != n_states or n_states < 2:
        raise ParameterError("n_states", f"n_states must be an integer >= 2, got {n_states!r}")
    if not 0 <= eps <= 1 or (chains == 1 and eps > 0):
        raise ParameterError("eps", f"eps must be in [0, 1] (0 for one chain), got {eps!r}")
    if observe not in OBSERVE:
        raise ParameterError(
            "observe", f"observe={observe!r} is not allowed; allowed: {', '.join(OBSERVE)}"
        )
    top = MAX_SET_SYMBOLS if observe == "set" else None
    if (
        int(n_observations) != n_observations
        or n_observations < 1
        or (top and n_observations > top)
    ):
        raise ParameterError(
            "n_observations",
            f"n_observations must be an integer >= 1{f' and <= {top} with sets' if top else ''}, "
            f"got {n_observations!r}",
        )
    if not alpha > 0:
        raise ParameterError("alpha", f"alpha must be > 0, got {alpha!r}")


def build(
    chains: int,
    n_states: int,
    seed: int = 0,
    *,
    eps: float = 0.1,
    n_observations: int = 4,
    observe: str = "chain",
    alpha: float = 0.1,
) -> CoupledHMM:
    """``chains`` mixed-memory chains of ``n_states`` states each, coupled by ``eps``.

    Parameters
    ----------
    chains : int >= 1
    n_states : int >= 2
        States per chain.
    seed : int
    eps : float in [0, 1]
        Coupling: the probability that a chain moves by another chain's state.
    n_observations : int >= 1
        Symbols each chain emits.
    observe : {"chain", "set"}
        What is observed (``pipeline.coupled.model``).
    alpha : float > 0
        Dirichlet concentration of every row; small values give peaked rows.
    """
    check(chains, n_states, eps=eps, n_observations=n_observations, observe=observe, alpha=alpha)
    k, n = int(chains), int(n_states)

    def rows(stream, i, j, count, width):
        rng = np.random.default_rng([seed, stream, i, j])
        return rng.dirichlet(np.full(width, alpha), size=count)

    weights = np.full((k, k), eps / max(k - 1, 1))
    np.fill_diagonal(weights, 1 - eps)
    pairs = tuple(
        tuple(
            None if j == i else np.broadcast_to(rows(PAIR, i, j, n, n)[None, :, :], (n, n, n))
            for j in range(k)
        )
        for i in range(k)
    )
    return CoupledHMM(
        priors=tuple(rows(PRIOR, i, 0, 1, n)[0] for i in range(k)),
        weights=weights,
        own=tuple(rows(OWN, i, 0, n, n) for i in range(k)),
        pairs=pairs,
        emissions=tuple(rows(EMISSION, i, 0, n, n_observations) for i in range(k)),
        observe=observe,
    )
