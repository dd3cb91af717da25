"""Structured mean field for coupled HMMs: chain by chain, the others as marginals.

Inference chain by chain, as Thon and Kersting ("Distributed Relational State
Representations for Complex Stochastic Processes") propose for weakly coupled HMMs.

Each chain is a tractable HMM once the other chains are replaced by marginals
``q_j(x_{j,t})``. Three kinds of factor join chain i to the others, and each reaches chain
i's forward-backward as a message computed from the others' marginals:

- its own moves: the transition at step t becomes ``E[P(x'_i | x_i, x_{-i})] =
  weights[i, i] own[i] + sum_j weights[i, j] sum_{x_j} q_{j,t}(x_j) pairs[i][j][:, x_j, :]``
  (n_i^2 n_j work per term, n_i n_j when the table ignores ``x_i``);
- the other chains' moves (the chain-wise Viterbi's term (d)): chain j's move from t
  depends on ``x_{i,t}``, so it sends chain i the message
  ``sum_{x_j, x'_j} alpha_j(x_j) E[P(x'_j | x_i, x_j, ...)] gamma_j(x'_j)`` from chain j's
  own forward and backward messages;
- an observation shared by the chains (``observe="set"``): ``E[P(o_t | x_i, x_{-i})]``.

Every message reads the others' *cavity* marginals, their marginals without what that
factor itself told them, as belief propagation does, so no evidence is counted twice. Where
the chains' coupling forms no loop (one chain copying another, say) the fixed point is the
exact marginals. A sweep costs ``k (k - 1)`` such terms per chain and step: the seed's
``k^3 n^2``, or ``k^3 n^3`` for pairwise tables that read both chains' states.

- ``smoothing``: ``P(x_{i,t} | o_0..o_{T-1})``, sweeps over the chains repeated until no
  marginal moves by more than ``tolerance``, from the fully factored filter's marginals;
- ``filtering``: ``P(x_{i,t} | o_0..o_t)`` online: step t is the structured mean field of
  the two steps t - 1 and t from the filtered marginals of t - 1 (the assumed density).

With ``eps = 0`` (independent chains) and every chain's symbol observed, both are exact.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.coupled.model import CoupledHMM
from pipeline.inference.inputs import read_likelihoods
from pipeline.inference.recursion import Stepped
from pipeline.inference.smoother import forward_backward

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


def transition(model: CoupledHMM, i: int, others: list, skip: int | None = None) -> np.ndarray:
    """Chain i's transition with the other chains at marginals ``others[j]`` (n_j,)
    (``others[i]`` unused), leaving out the term of chain ``skip``: shape (n_i, n_i)."""
    out = model.weights[i, i] * model.own[i]
    for j in model.sources(i):
        if j == skip:
            continue
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


def _filter(model: CoupledHMM, observations, priors) -> tuple[list, list]:
    """The fully factored (Boyen-Koller) filter from chain priors ``priors``: the filtered
    marginals and the predicted ones (before conditioning), each a list of k arrays (T, n_i).
    Each step is the exact step of the product of the marginals, projected onto a product,
    with each chain conditioned on what the observation says of it alone."""
    k, steps = model.chains, len(observations)
    filtered = [np.empty((steps, n)) for n in model.sizes]
    predicted = [np.empty((steps, n)) for n in model.sizes]
    for t, o in enumerate(np.asarray(observations)):
        last = [filtered[j][t - 1] for j in range(k)] if t else []
        ahead = [last[i] @ transition(model, i, last) if t else priors[i] for i in range(k)]
        for i in range(k):
            predicted[i][t] = ahead[i]
            filtered[i][t] = _normalise(ahead[i] * likelihood(model, i, int(o), ahead), ahead[i])
    return filtered, predicted


def _outgoing(model: CoupledHMM, i: int, j: int, alpha, gamma, others: list) -> np.ndarray:
    """The message chain i's move from step t sends to chain j's state at t, shape (n_j,):
    ``sum_{x_i, x'_i} alpha(x_i) E[P(x'_i | x_i, x_j, x_{-ij})] gamma(x'_i)``, the others
    (not i, j) at marginals ``others``; ``alpha`` (n_i,) is chain i's forward message at t,
    ``gamma`` (n_i,) its backward message into t + 1 times its likelihood there."""
    rest = alpha @ transition(model, i, others, skip=j) @ gamma
    table = model.pairs[i][j]
    if table.strides[0] == 0:  # ignores x_i
        varying = alpha.sum() * (table[0] @ gamma)
    else:
        varying = np.einsum("a,ajb,b->j", alpha, table, gamma)
    message = rest + model.weights[i, j] * varying
    return message / message.max() if message.max() > 0 else np.ones_like(message)


class _Chain(NamedTuple):
    """Forward-backward on one chain, each array (T, n): smoothed ``P(x_t | o)``, the emission
    cavity ``P(x_t | o without o_t)``, the forward messages ``alpha`` (filtered) and
    ``gamma`` (at t, proportional to the backward message into t times the likelihood at t;
    zeros at step 0, which no move reaches)."""

    smoothed: np.ndarray
    cavity: np.ndarray
    alpha: np.ndarray
    gamma: np.ndarray


def _chain_smoother(prior, transitions, emissions, messages) -> _Chain:
    """Forward-backward on one chain with transitions (T - 1, n, n), emission likelihoods
    (T, n) and the other chains' messages (T, n): ``pipeline.inference``'s recursion over the
    time-varying transitions, with its conventions (an impossible step keeps its predicted
    belief and counts as unobserved going backward)."""
    evidence = read_likelihoods(emissions * messages, prior.size)
    found = forward_backward(Stepped(transitions.__getitem__), prior, evidence, keep=True)
    alpha, after = found.filtered, found.after
    moves = transitions[: len(alpha) - 1]
    ahead, beta = np.empty_like(alpha), np.ones_like(alpha)
    ahead[0] = prior
    ahead[1:] = np.einsum("ti,tij->tj", alpha[:-1], moves)
    beta[:-1] = np.einsum("tij,tj->ti", moves, after[:-1])  # P(o_{t+1:} | x_t), scaled
    cavity = np.empty_like(alpha)
    for t in range(len(alpha)):
        cavity[t] = _normalise(ahead[t] * messages[t] * beta[t], ahead[t])
    gamma = np.zeros_like(alpha)
    gamma[1:] = after[:-1]
    return _Chain(found.posteriors, cavity, alpha, gamma)


def _structured(model: CoupledHMM, observations, priors, q, cavity, tolerance, max_iterations):
    """The structured mean field's sweeps from marginals ``q`` and emission cavities ``cavity``
    (lists of k arrays (T, n_i), updated in place), with chain priors ``priors``."""
    k, steps = model.chains, len(observations)
    # sent[i][j][t]: the message chain i's move from t sends to chain j's state at t
    sent = [[np.ones((steps, n)) for n in model.sizes] for _ in range(k)]
    for sweep in range(1, max_iterations + 1):
        change = 0.0
        for i in range(k):
            # the others' marginals without what chain i's own moves told them
            others = [
                [
                    q[j][t] if j == i else _normalise(_divide(q[j][t], sent[i][j][t]), q[j][t])
                    for j in range(k)
                ]
                for t in range(steps)
            ]
            transitions = np.stack(
                [transition(model, i, others[t]) for t in range(steps - 1)]
                or [np.empty((model.sizes[i],) * 2)]
            )
            emissions = np.stack(
                [
                    likelihood(model, i, int(o), [cavity[j][t] for j in range(k)])
                    for t, o in enumerate(observations)
                ]
            )
            messages = np.prod([sent[j][i] for j in range(k) if j != i], axis=0)
            chain = _chain_smoother(priors[i], transitions, emissions, messages)
            cavity[i] = chain.cavity
            for j in model.sources(i):
                for t in range(steps - 1):
                    sent[i][j][t] = _outgoing(
                        model, i, j, chain.alpha[t], chain.gamma[t + 1], others[t]
                    )
            change, q[i] = max(change, np.abs(chain.smoothed - q[i]).max()), chain.smoothed
        if change <= tolerance:
            return MeanFieldResult(q, sweep, True)
    return MeanFieldResult(q, max_iterations, False)


def filtering(
    model: CoupledHMM, observations, *, tolerance=TOLERANCE, max_iterations=MAX_ITERATIONS
) -> MeanFieldResult:
    """Online structured mean field: ``marginals[i][t] ~ P(x_{i,t} | o_0..o_t)``.

    Step t is the structured mean field of the two steps t - 1 and t, started from the
    filtered marginals of t - 1 (a product: the assumed density) and observing ``o_t``, so
    the other chains' observations at t inform chain i through the moves from t - 1.
    ``iterations`` is the most sweeps a step took.

    ``observations``: joint symbols (T,), -1 where nothing is observed.
    """
    observations = np.asarray(observations)
    out = [np.empty((len(observations), n)) for n in model.sizes]
    most, converged = 0, True
    for t, o in enumerate(observations):
        if t == 0:
            priors, window = list(model.priors), np.array([o])
        else:
            priors, window = [m[t - 1] for m in out], np.array([-1, o])
        q, cavity = _filter(model, window, priors)
        result = _structured(model, window, priors, q, cavity, tolerance, max_iterations)
        most, converged = max(most, result.iterations), converged and result.converged
        for i in range(model.chains):
            out[i][t] = result.marginals[i][-1]
    return MeanFieldResult(out, most, converged)


def smoothing(
    model: CoupledHMM, observations, *, tolerance=TOLERANCE, max_iterations=MAX_ITERATIONS
) -> MeanFieldResult:
    """Structured mean field: ``marginals[i][t] ~ P(x_{i,t} | o_0..o_{T-1})``, started from the
    fully factored filter's marginals.

    ``observations``: joint symbols (T,), -1 where nothing is observed.
    """
    observations = np.asarray(observations)
    q, cavity = _filter(model, observations, model.priors)
    return _structured(model, observations, model.priors, q, cavity, tolerance, max_iterations)


def _divide(values: np.ndarray, by: np.ndarray) -> np.ndarray:
    """``values / by``, 0 where ``by`` is 0."""
    return np.divide(values, by, out=np.zeros_like(values), where=by > 0)
