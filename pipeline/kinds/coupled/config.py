"""The coupled kind's settings: the ``coupled`` section, every field's meaning in its
docstring (``--help``, the reference), the numbers' ranges declared on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.coupled.model import OBSERVE
from pipeline.sweep.config.validation import choices, ranged


@dataclass
class CoupledConfig:
    """A sweep of weakly coupled HMMs (Thon and Kersting): structured mean field and chain-wise
    Viterbi against exact and top-p, per (model, chains, n_states, eps, seed, observe)
    (``pipeline.kinds.coupled``)."""

    chains: list[int] = ranged(lambda: [2], least=2)
    """Chain counts k of the coupled HMMs, one cell each."""
    n_states: Any = choices(
        None, "a list of integers >= 2, or a mapping of chain counts to such lists"
    )
    """States per chain: a list for every chain count, or a mapping chains -> list
    (required)."""
    eps: list[float] = ranged(lambda: [0.0, 0.2], least=0, most=1)
    """Couplings: the probability that a chain moves by another chain's state."""
    seeds: list[int] = ranged(lambda: [0], least=0)
    """Seeds of the ``coupled`` family's models and of the sampled observations, one cell
    each."""
    observe: list[str] = choices(lambda: ["chain"], OBSERVE)
    """``chain`` (every chain's symbol) and/or ``set`` (the set of symbols emitted)."""
    n_observations: int = 4
    """Symbols each chain of the ``coupled`` family emits."""
    alpha: float = 0.1
    """Dirichlet concentration of the ``coupled`` family's rows, > 0."""
    relational: dict[str, Any] = choices(
        dict, "a mapping of spec names to lists of domains, each a mapping of types to integers"
    )
    """Relational specs (``conf/relational/<name>.yaml``) -> domains to ground them at,
    each a mapping type -> how many of its constants to keep (the rest of the types whole)."""
    horizon: int = ranged(50, least=1)
    """Steps after the prior: each cell samples a path of horizon + 1 steps and stores its
    marginals' errors at t = 0..horizon."""
    observe_every: int = ranged(4, least=1)
    """Symbols are observed at every step t with t % observe_every == 0."""
    topp: list[float] = ranged(lambda: [0.9, 0.99], least=0, most=1, above=True)
    """Top-p masses of the joint chain's transitions, run beside the mean field."""
    tolerance: float = ranged(1e-6, least=0, above=True)
    """The structured mean field sweeps over the chains until no marginal moves by more than
    this (``pipeline.coupled.meanfield``)..."""
    max_iterations: int = ranged(100, least=1)
    """...or this many sweeps have run (the cell then stores that it did not converge)."""
    exact_max_states: int = ranged(4096, least=1)
    """Exact inference (and top-p on the joint) only up to this many joint states."""
    repeats: int = ranged(3, least=1)
    """Every method of a cell is timed in rounds, each running every method once
    (``pipeline.sweep.timing``); a runtime is the median over at most this many rounds..."""
    budget: float = ranged(1.0, least=0)
    """...or over as many as fit in this many seconds (at least one)."""
