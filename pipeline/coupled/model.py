"""The weakly coupled HMM container: k chains, each moving given the joint state.

The models of Thon and Kersting, "Distributed Relational State Representations for Complex
Stochastic Processes", written out.

Chain ``i`` has ``n_i`` states; a joint state is ``x = (x_0, ..., x_{k-1})``, numbered
``np.ravel_multi_index(x, sizes)`` (chain 0 most significant). Each chain picks its next
state from the current *joint* state, independently of the other chains' next states:

- ``P(x_0) = prod_i priors[i][x_{i,0}]``;
- ``P(x' | x) = prod_i P(x'_i | x)``, with the mixture of pairwise tables
  ``P(x'_i | x) = weights[i, i] own[i][x_i, x'_i]
  + sum_{j != i} weights[i, j] pairs[i][j][x_i, x_j, x'_i]``
  (Saul and Jordan's mixed-memory form when ``pairs[i][j]`` ignores ``x_i``; the grounded
  relational models of ``pipeline.coupled.relational`` when it does not);
- every chain emits a symbol ``y_i ~ emissions[i][x_i]``. What is observed
  (``observe``): ``"chain"``, every chain's symbol (the joint symbol
  ``np.ravel_multi_index(y, m)``), or ``"set"``, the set of symbols emitted, which voice
  emitted which lost (the joint symbol ``sum_i 2**y_i`` over the distinct ``y_i``; every
  chain has the same ``m`` symbols).

Inference lives in ``exact``, ``meanfield`` and ``viterbi``; this module only holds and
checks the arrays and answers the model's own probabilities.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from pipeline.hmm import HMM, ROW_SUM_TOLERANCE

OBSERVE = ("chain", "set")
"""What a coupled model's observation is: every chain's symbol, or the set of symbols."""

MAX_SET_SYMBOLS = 16
"""The most symbols per chain the ``set`` observation takes (its joint symbols are 2**m)."""


def _stochastic(name: str, array: np.ndarray) -> None:
    if not np.all(np.isfinite(array)) or (array < 0).any():
        raise ValueError(f"{name} has a negative or non-finite entry")
    sums = array.sum(axis=-1)
    off = np.abs(sums - 1) > ROW_SUM_TOLERANCE
    if off.any():
        where = tuple(int(i) for i in np.argwhere(off)[0])
        raise ValueError(f"{name} row {where} sums to {float(sums[where]):.12g}; it must sum to 1")


@dataclass(frozen=True, eq=False)
class CoupledHMM:
    """k weakly coupled chains (see the module docstring for the probabilities).

    Parameters
    ----------
    priors : tuple of k arrays, shape (n_i,)
        ``P(x_{i,0})``.
    weights : ndarray, shape (k, k)
        Row-stochastic mixture weights: ``weights[i, i]`` of chain i's own table,
        ``weights[i, j]`` of its table given chain j.
    own : tuple of k arrays, shape (n_i, n_i)
        ``own[i][x_i, x'_i]``, row-stochastic.
    pairs : tuple of k tuples of k arrays or None, ``pairs[i][j]`` shape (n_i, n_j, n_i)
        ``pairs[i][j][x_i, x_j, x'_i]``, row-stochastic along the last axis; None on the
        diagonal and wherever ``weights[i, j]`` is 0.
    emissions : tuple of k arrays, shape (n_i, m_i)
        ``P(y_i | x_i)``.
    observe : {"chain", "set"}
    """

    priors: tuple
    weights: np.ndarray
    own: tuple
    pairs: tuple
    emissions: tuple
    observe: str = "chain"

    def __post_init__(self) -> None:
        k = len(self.priors)
        weights = np.asarray(self.weights, dtype=np.float64)
        if k < 1 or weights.shape != (k, k):
            raise ValueError(
                f"weights has shape {weights.shape}; with {k} chains it must be ({k}, {k})"
            )
        _stochastic("weights", weights)
        if self.observe not in OBSERVE:
            raise ValueError(
                f"observe={self.observe!r} is not allowed; allowed: {', '.join(OBSERVE)}"
            )
        for i in range(k):
            n = self.priors[i].shape[0]
            _stochastic(f"priors[{i}]", np.asarray(self.priors[i]))
            if self.own[i].shape != (n, n):
                raise ValueError(f"own[{i}] has shape {self.own[i].shape}; it must be ({n}, {n})")
            _stochastic(f"own[{i}]", self.own[i])
            if self.emissions[i].shape[0] != n:
                raise ValueError(
                    f"emissions[{i}] has {self.emissions[i].shape[0]} rows; it must have {n}"
                )
            _stochastic(f"emissions[{i}]", self.emissions[i])
            for j in range(k):
                table = self.pairs[i][j]
                if j == i or weights[i, j] == 0:
                    continue
                shape = (n, self.priors[j].shape[0], n)
                if table is None or table.shape != shape:
                    got = None if table is None else table.shape
                    raise ValueError(f"pairs[{i}][{j}] has shape {got}; it must be {shape}")
                _stochastic(f"pairs[{i}][{j}]", table)
        if self.observe == "set":
            m = {e.shape[1] for e in self.emissions}
            if len(m) != 1 or m.pop() > MAX_SET_SYMBOLS:
                raise ValueError(
                    f"observe='set' needs every chain to have the same number of symbols, at "
                    f"most {MAX_SET_SYMBOLS}"
                )
        object.__setattr__(self, "weights", weights)

    @property
    def chains(self) -> int:
        """Number of chains ``k``."""
        return len(self.priors)

    @property
    def sizes(self) -> tuple[int, ...]:
        """States per chain ``(n_0, ..., n_{k-1})``."""
        return tuple(p.shape[0] for p in self.priors)

    @property
    def symbols(self) -> tuple[int, ...]:
        """Symbols per chain ``(m_0, ..., m_{k-1})``."""
        return tuple(e.shape[1] for e in self.emissions)

    @property
    def n_joint(self) -> int:
        """Number of joint states ``prod_i n_i``."""
        return int(np.prod(self.sizes))

    @property
    def n_observations(self) -> int:
        """Number of joint observation symbols: ``prod_i m_i``, or ``2**m`` for sets."""
        if self.observe == "set":
            return 2 ** self.symbols[0]
        return int(np.prod(self.symbols))

    def sources(self, i: int) -> list[int]:
        """The chains ``j != i`` whose state chain i's next state depends on."""
        return [j for j in range(self.chains) if j != i and self.weights[i, j] > 0]

    def conditional(self, i: int, states: np.ndarray) -> np.ndarray:
        """``P(x'_i | x)`` for joint states ``states`` (B, k) of ints: shape (B, n_i)."""
        rows = self.weights[i, i] * self.own[i][states[:, i]]
        for j in self.sources(i):
            rows = rows + self.weights[i, j] * self.pairs[i][j][states[:, i], states[:, j]]
        return rows

    @functools.cached_property
    def joint_states(self) -> np.ndarray:
        """Every joint state as chain states, shape (n_joint, k), in joint-index order."""
        return np.stack(np.unravel_index(np.arange(self.n_joint), self.sizes), axis=1)

    @functools.cached_property
    def symbol_tuples(self) -> np.ndarray:
        """Every tuple of chain symbols ``y``, shape (prod m_i, k), and, for sets, its joint
        symbol in ``set_codes``."""
        return np.stack(np.unravel_index(np.arange(int(np.prod(self.symbols))), self.symbols), 1)

    @functools.cached_property
    def set_codes(self) -> np.ndarray:
        """The joint symbol (a bit mask) of each row of ``symbol_tuples``, shape (prod m_i,)."""
        bits = np.zeros(self.symbol_tuples.shape[0], dtype=np.int64)
        for i in range(self.chains):
            bits |= np.int64(1) << self.symbol_tuples[:, i].astype(np.int64)
        return bits

    def joint_symbol(self, symbols: np.ndarray) -> np.ndarray:
        """The joint observation of chain symbols ``symbols`` (..., k): shape (...)."""
        symbols = np.asarray(symbols, dtype=np.int64)
        if self.observe == "chain":
            return np.ravel_multi_index(tuple(np.moveaxis(symbols, -1, 0)), self.symbols)
        return np.bitwise_or.reduce(np.int64(1) << symbols, axis=-1)

    def chain_symbols(self, observation: int) -> np.ndarray:
        """Every chain's symbol in a ``chain`` observation, shape (k,)."""
        return np.array(np.unravel_index(int(observation), self.symbols))

    def likelihood(self, observation: int, states: np.ndarray) -> np.ndarray:
        """``P(o | x)`` for joint states ``states`` (B, k): shape (B,)."""
        if self.observe == "chain":
            y = self.chain_symbols(observation)
            return np.prod([self.emissions[i][states[:, i], y[i]] for i in range(self.chains)], 0)
        tuples = self.symbol_tuples[self.set_codes == observation]
        total = np.zeros(states.shape[0])
        for y in tuples:
            total += np.prod([self.emissions[i][states[:, i], y[i]] for i in range(self.chains)], 0)
        return total

    def log_joint(self, paths: np.ndarray, observations: np.ndarray) -> float:
        """``log P(x_{0:T}, o_{0:T})`` of chain paths ``paths`` (T, k); ``observations``
        (T,) joint symbols, -1 where nothing is observed."""
        paths = np.asarray(paths)
        total = sum(np.log(self.priors[i][paths[0, i]]) for i in range(self.chains))
        for i in range(self.chains):
            total += np.log(
                self.conditional(i, paths[:-1])[np.arange(len(paths) - 1), paths[1:, i]]
            ).sum()
        for t, o in enumerate(observations):
            if o >= 0:
                total += np.log(self.likelihood(int(o), paths[t : t + 1])[0])
        return float(total)

    def joint_prior(self) -> np.ndarray:
        """``P(x_0)`` over the joint states, shape (n_joint,)."""
        return functools.reduce(np.multiply.outer, self.priors).ravel()

    def transition_rows(self, states: np.ndarray) -> np.ndarray:
        """``P(x' | x)`` for the joint states ``states`` (r, k): rows (r, n_joint), the
        product of every chain's ``conditional``."""
        rows = np.ones((len(states), 1))
        for i in range(self.chains):
            rows = (rows[:, :, None] * self.conditional(i, states)[:, None, :]).reshape(
                len(states), -1
            )
        return rows

    def joint(self) -> HMM:
        """The joint chain as an ``HMM`` of ``n_joint`` states with dense matrices, which every
        method and inference function takes. Memory: ``n_joint**2`` transition entries."""
        states = self.joint_states
        prior = self.joint_prior()
        transition = self.transition_rows(states)
        chain_emission = np.ones((self.n_joint, 1))
        for i in range(self.chains):
            rows = self.emissions[i][states[:, i]]
            chain_emission = (chain_emission[:, :, None] * rows[:, None, :]).reshape(
                self.n_joint, -1
            )
        if self.observe == "chain":
            emission = chain_emission
        else:
            emission = np.zeros((self.n_joint, self.n_observations))
            np.add.at(emission.T, self.set_codes, chain_emission.T)
        return HMM(prior, transition, emission)

    def sample(self, steps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """A path of chain states (steps, k) and its joint observations (steps,), drawn chain by
        chain (the joint chain is never built)."""
        k = self.chains
        paths = np.empty((steps, k), np.int64)
        symbols = np.empty((steps, k), np.int64)
        for t in range(steps):
            for i in range(k):
                p = self.priors[i] if t == 0 else self.conditional(i, paths[t - 1 : t])[0]
                paths[t, i] = rng.choice(p.size, p=p / p.sum())
                e = self.emissions[i][paths[t, i]]
                symbols[t, i] = rng.choice(e.size, p=e / e.sum())
        return paths, self.joint_symbol(symbols)
