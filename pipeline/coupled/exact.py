"""Exact inference on the joint chain of a coupled HMM, without its n^k x n^k matrix.

``JointTransition`` applies one step of the joint transition ``P(x' | x) = prod_i
P(x'_i | x)`` from the pairwise tables: the product of the k mixtures expands into one
term per choice of each chain's table (at most ``prod_i (1 + sources)`` terms), and
each term is a tensor contraction of the belief (an array over ``n_0 x ... x n_{k-1}``)
with k small tables, ``O(n^(k+1))`` to ``O(n^(k+2))`` work instead of ``n^(2k)``. Viterbi
needs the maximum over predecessors, which does not distribute over the mixture: it
builds the log matrix once, in row blocks (``n^(2k)`` work and memory), and a compiled
max-product step reads them.

Functions mirror ``pipeline.inference``: ``filtering``/``smoothing`` give
``P(x_t | o_0..o_t)`` and ``P(x_t | o_0..o_{T-1})`` over joint states, ``viterbi`` the
most probable joint path; ``marginals`` turns joint beliefs into each chain's.
They do not call ``pipeline.operators``' products, which take the transition as a matrix
or its factors: the joint chain's is never built, its step is the contraction above, and
its max-product step (``pipeline.kernels.maxplus``) updates the maxima one block of log
rows at a time, where ``pipeline.operators.max_product`` reads a whole matrix.
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import numpy as np

from pipeline.coupled.model import CoupledHMM
from pipeline.kernels import maxplus

BLOCK_ENTRIES = 2**22
"""Rows of the joint matrix are read in blocks of about this many entries (32 MiB)."""


def _factor(model: CoupledHMM, i: int, source: int) -> tuple[np.ndarray, list]:
    """Chain i's table from ``source`` (i: its own) and its einsum labels: joint state
    labels 0..k-1, next-state labels k..2k-1."""
    k = model.chains
    if source == i:
        return model.weights[i, i] * model.own[i], [i, k + i]
    table = model.pairs[i][source]
    if table.strides[0] == 0:  # the table ignores x_i (mixed memory): a matrix over (x_j, x'_i)
        return model.weights[i, source] * table[0], [source, k + i]
    return model.weights[i, source] * table, [i, source, k + i]


class JointTransition:
    """The joint transition matrix of ``model``, shape (n_joint, n_joint), kept as tables.

    ``forward(b) = b @ T``, ``backward(v) = T @ v`` (b, v shape (n_joint,)), ``rows(a, b)``
    the dense rows ``T[a:b]``, ``toarray()`` all of them.
    """

    def __init__(self, model: CoupledHMM):
        self.model = model
        self.shape = (model.n_joint, model.n_joint)
        k = model.chains
        choices = [[i, *model.sources(i)] for i in range(k)]
        self.terms = [
            [_factor(model, i, source) for i, source in enumerate(choice)]
            for choice in itertools.product(*choices)
        ]

    @staticmethod
    def _operands(term) -> list:
        return [x for table, labels in term for x in (table, labels)]

    @functools.cached_property
    def _forward(self) -> list:
        """Per term: its operands after the belief's and the einsum path of the contraction."""
        k, ones = self.model.chains, np.ones(self.model.sizes)
        out = []
        for term in self.terms:
            args = [ones, list(range(k)), *self._operands(term), list(range(k, 2 * k))]
            out.append((self._operands(term), np.einsum_path(*args, optimize="greedy")[0]))
        return out

    @functools.cached_property
    def _backward(self) -> list:
        """Per term: its operands, the joint-state labels it reads (a chain's state that no
        table of the term reads leaves the result constant along it) and the einsum path."""
        k, ones = self.model.chains, np.ones(self.model.sizes)
        out = []
        for term in self.terms:
            read = sorted({label for _, labels in term for label in labels if label < k})
            args = [ones, list(range(k, 2 * k)), *self._operands(term), read]
            out.append((self._operands(term), read, np.einsum_path(*args, optimize="greedy")[0]))
        return out

    def forward(self, belief: np.ndarray) -> np.ndarray:
        """``belief @ T``: the distribution of the next joint state, shape (n_joint,)."""
        k, b = self.model.chains, belief.reshape(self.model.sizes)
        out = sum(
            np.einsum(b, list(range(k)), *operands, list(range(k, 2 * k)), optimize=path)
            for operands, path in self._forward
        )
        return out.ravel()

    def backward(self, values: np.ndarray) -> np.ndarray:
        """``T @ values``: the expected value of ``values`` at the next step, shape (n_joint,)."""
        k, sizes = self.model.chains, self.model.sizes
        v = values.reshape(sizes)
        out = np.zeros(sizes)
        for operands, read, path in self._backward:
            part = np.einsum(v, list(range(k, 2 * k)), *operands, read, optimize=path)
            shape = [sizes[j] if j in read else 1 for j in range(k)]
            out += part.reshape(shape)
        return out.ravel()

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``T[start:stop]`` as a dense array (stop - start, n_joint)."""
        return self.model.transition_rows(self.model.joint_states[start:stop])

    def blocks(self):
        """``(start, stop)`` of row blocks of about ``BLOCK_ENTRIES`` entries."""
        n = self.shape[0]
        size = max(1, BLOCK_ENTRIES // n)
        return [(a, min(a + size, n)) for a in range(0, n, size)]

    def toarray(self) -> np.ndarray:
        return self.rows(0, self.shape[0])


class ExactResult(NamedTuple):
    """Exact forward-backward on the joint chain; T steps, N = n_joint.

    filtered : ndarray, shape (T, N)
        ``P(x_t | o_0..o_t)``.
    smoothed : ndarray, shape (T, N)
        ``P(x_t | o_0..o_{T-1})``.
    log_evidence : float
        ``log P(o_0..o_{T-1})``.
    """

    filtered: np.ndarray
    smoothed: np.ndarray
    log_evidence: float


def likelihoods(model: CoupledHMM, observations: np.ndarray) -> np.ndarray:
    """``P(o_t | x)`` for every step and joint state, shape (T, n_joint); ones where nothing
    is observed."""
    out = np.ones((len(observations), model.n_joint))
    for symbol in np.unique(observations[observations >= 0]):
        out[observations == symbol] = model.likelihood(int(symbol), model.joint_states)
    return out


def smoothing(
    model: CoupledHMM, observations, transition: JointTransition | None = None
) -> ExactResult:
    """Filtered and smoothed joint beliefs and the log evidence (``ExactResult``).

    ``observations``: joint symbols, shape (T,), -1 where nothing is observed.
    """
    T = transition or JointTransition(model)
    observations = np.asarray(observations, dtype=np.int64)
    lik = likelihoods(model, observations)
    steps = len(observations)
    filtered = np.empty((steps, model.n_joint))
    scale = np.empty(steps)
    belief = model.joint_prior()
    for t in range(steps):
        if t:
            belief = T.forward(filtered[t - 1])
        belief = belief * lik[t]
        scale[t] = belief.sum()
        filtered[t] = belief / scale[t]
    smoothed = np.empty_like(filtered)
    beta = np.ones(model.n_joint)
    smoothed[-1] = filtered[-1]
    for t in range(steps - 2, -1, -1):
        beta = T.backward(lik[t + 1] * beta) / scale[t + 1]
        smoothed[t] = filtered[t] * beta
        smoothed[t] /= smoothed[t].sum()
    return ExactResult(filtered, smoothed, float(np.log(scale).sum()))


def viterbi(model: CoupledHMM, observations, transition: JointTransition | None = None):
    """The most probable joint path and its log probability ``log P(x_{0:T}, o)``.

    Returns
    -------
    paths : ndarray of int, shape (T, k)
        Each chain's state along the path.
    log_joint : float
    """
    T = transition or JointTransition(model)
    observations = np.asarray(observations, dtype=np.int64)
    with np.errstate(divide="ignore"):
        log_lik = np.log(likelihoods(model, observations))
        delta = np.log(model.joint_prior()) + log_lik[0]
        blocks = [(a, b, np.log(T.rows(a, b))) for a, b in T.blocks()]
    steps, n = len(observations), model.n_joint
    back = np.empty((steps, n), dtype=np.int64)
    for t in range(1, steps):
        best = np.full(n, -np.inf)
        back[t] = 0
        for a, _, log_rows in blocks:
            maxplus.max_step(delta, log_rows, a, best, back[t])
        delta = best + log_lik[t]
    path = maxplus.backtrack(back, int(delta.argmax()))
    return model.joint_states[path], float(delta.max())


def marginals(beliefs: np.ndarray, sizes) -> list[np.ndarray]:
    """Each chain's marginals of joint beliefs (T, n_joint): a list of k arrays (T, n_i)."""
    joint = beliefs.reshape(beliefs.shape[0], *sizes)
    k = len(sizes)
    return [joint.sum(axis=tuple(1 + j for j in range(k) if j != i)) for i in range(k)]
