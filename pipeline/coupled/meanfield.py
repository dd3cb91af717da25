"""Structured mean field for coupled HMMs (seed 001): chain by chain, the others as marginals.

Each chain is a tractable HMM once the other chains are replaced by marginals
``q_j(x_{j,t})``: its transition at step t becomes
``E_{q_{-i,t}}[P(x'_i | x_i, x_{-i})] = weights[i, i] own[i]
+ sum_j weights[i, j] sum_{x_j} q_{j,t}(x_j) pairs[i][j][:, x_j, :]`` (n_i^2 n_j work per
term, n_i n_j when the table ignores ``x_i``) and its likelihood
``E_{c_{-i,t}}[P(o_t | x_i, x_{-i})]`` (just ``P(y_i | x_i)`` when every chain's symbol is
observed). The likelihood reads the others' *cavity* marginals ``c_j``, their marginals
without ``o_t``'s own message, so an observation shared by the chains (``observe="set"``)
is not counted twice (belief propagation's rule for a factor that joins the chains).
Two uses of that:

- ``filtering``, online, for ``P(x_{i,t} | o_0..o_t)``: each step advances every chain
  by its transition given the others' filtered marginals of the previous step, then
  conditions with the others at their predicted marginals: the exact step of the product
  of the marginals, projected back onto a product (Boyen and Koller's fully factored
  filter).
- ``smoothing``, the structured mean field of the whole sequence: each chain in turn
  runs forward-backward with the others' current marginals, sweeps repeated until no
  marginal moves by more than ``tolerance``.

With ``eps = 0`` (independent chains) and every chain's symbol observed, both are exact.
The others' own transitions' dependence on chain i (the chain-wise Viterbi's term (d))
is not fed back: each transition factor informs only the chain it moves, so the others'
marginals are already its cavity.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.coupled.model import CoupledHMM

TOLERANCE = 1e-6
"""Iterate until no marginal probability moves by more than this."""
MAX_ITERATIONS = 100
"""Stop after this many sweeps, converged or not."""


class MeanFieldResult(NamedTuple):
    """The structured mean field's marginals and how its iteration went; T steps.

    marginals : list of k arrays, shape (T, n_i)
        ``q_i(x_{i,t}) ~ P(x_{i,t} | o_0..o_{T-1})``.
    iterations : int
        Sweeps over the chains.
    converged : bool
        The last sweep moved no marginal by more than ``tolerance``.
    """

    marginals: list
    iterations: int
    converged: bool


def transition(model: CoupledHMM, i: int, others: list) -> np.ndarray:
    """Chain i's transition with the other chains at marginals ``others[j]`` (n_j,)
    (``others[i]`` unused): shape (n_i, n_i)."""
    out = model.weights[i, i] * model.own[i]
    for j in model.sources(i):
        table = model.pairs[i][j]
        if table.strides[0] == 0:  # ignores x_i: one row for every x_i
            out = out + model.weights[i, j] * (others[j] @ table[0])[None, :]
        else:
            out = out + model.weights[i, j] * np.einsum("ajb,j->ab", table, others[j])
    return out


def likelihood(model: CoupledHMM, i: int, observation: int, others: list) -> np.ndarray:
    """``E[P(o | x_i, x_{-i})]`` over the others' marginals, shape (n_i,); ones for -1."""
    if observation < 0:
        return np.ones(model.sizes[i])
    if model.observe == "chain":
        return model.emissions[i][:, model.chain_symbols(observation)[i]]
    tuples = model.symbol_tuples[model.set_codes == observation]
    weight = np.ones(len(tuples))
    for j in range(model.chains):
        if j != i:
            weight *= (others[j] @ model.emissions[j])[tuples[:, j]]
    symbols = np.bincount(tuples[:, i], weights=weight, minlength=model.symbols[i])
    return model.emissions[i] @ symbols


def _normalise(values: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    total = values.sum()
    return values / total if total > 0 else fallback


def _filter(model: CoupledHMM, observations) -> tuple[list, list]:
    """The filtered marginals and the predicted ones (before conditioning), each a list of k
    arrays (T, n_i)."""
    k, steps = model.chains, len(observations)
    filtered = [np.empty((steps, n)) for n in model.sizes]
    predicted = [np.empty((steps, n)) for n in model.sizes]
    for t, o in enumerate(np.asarray(observations)):
        last = [filtered[j][t - 1] for j in range(k)] if t else None
        ahead = [last[i] @ transition(model, i, last) if t else model.priors[i] for i in range(k)]
        for i in range(k):
            predicted[i][t] = ahead[i]
            filtered[i][t] = _normalise(ahead[i] * likelihood(model, i, int(o), ahead), ahead[i])
    return filtered, predicted


def filtering(model: CoupledHMM, observations) -> list:
    """The fully factored filter: ``marginals[i][t] ~ P(x_{i,t} | o_0..o_t)``, k arrays (T, n_i).

    ``observations``: joint symbols (T,), -1 where nothing is observed.
    """
    return _filter(model, observations)[0]


def _chain_smoother(prior, transitions, likelihoods) -> tuple[np.ndarray, np.ndarray]:
    """Forward-backward on one chain with transitions (T - 1, n, n) and likelihoods (T, n).

    Returns the smoothed marginals ``P(x_t | o)`` and the cavities ``P(x_t | o without o_t)``,
    each (T, n).
    """
    steps, n = likelihoods.shape
    alpha, ahead = np.empty_like(likelihoods), np.empty_like(likelihoods)
    for t in range(steps):
        ahead[t] = alpha[t - 1] @ transitions[t - 1] if t else prior
        alpha[t] = _normalise(ahead[t] * likelihoods[t], ahead[t])  # o_t impossible: keep ahead
    smoothed, cavity = np.empty_like(alpha), np.empty_like(alpha)
    beta = np.ones(n)
    for t in range(steps - 1, -1, -1):
        if t < steps - 1:
            beta = transitions[t] @ (likelihoods[t + 1] * beta)
            beta /= beta.max() if beta.max() > 0 else 1.0
        smoothed[t] = _normalise(alpha[t] * beta, alpha[t])
        cavity[t] = _normalise(ahead[t] * beta, ahead[t])
    return smoothed, cavity


def smoothing(
    model: CoupledHMM, observations, *, tolerance=TOLERANCE, max_iterations=MAX_ITERATIONS
) -> MeanFieldResult:
    """Structured mean field: ``marginals[i][t] ~ P(x_{i,t} | o_0..o_{T-1})``, started from the
    fully factored filter (``filtering``).

    ``observations``: joint symbols (T,), -1 where nothing is observed.
    """
    observations = np.asarray(observations)
    k, steps = model.chains, len(observations)
    q, cavity = _filter(model, observations)
    for sweep in range(1, max_iterations + 1):
        change = 0.0
        for i in range(k):
            transitions = np.stack(
                [transition(model, i, [q[j][t] for j in range(k)]) for t in range(steps - 1)]
                or [np.empty((model.sizes[i],) * 2)]
            )
            likelihoods = np.stack(
                [
                    likelihood(model, i, int(o), [cavity[j][t] for j in range(k)])
                    for t, o in enumerate(observations)
                ]
            )
            new, cavity[i] = _chain_smoother(model.priors[i], transitions, likelihoods)
            change, q[i] = max(change, np.abs(new - q[i]).max()), new
        if change <= tolerance:
            return MeanFieldResult(q, sweep, True)
    return MeanFieldResult(q, max_iterations, False)
