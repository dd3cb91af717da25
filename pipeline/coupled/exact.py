"""Exact inference on the joint chain of a coupled HMM, without its n^k x n^k matrix.

``JointTransition`` applies one step of the joint transition ``P(x' | x) = prod_i
P(x'_i | x)`` from the pairwise tables: the product of the k mixtures expands into one
term per choice of each chain's table (at most ``prod_i (1 + sources)`` terms), and
each term is a tensor contraction of the belief (an array over ``n_0 x ... x n_{k-1}``)
with k small tables, ``O(n^(k+1))`` to ``O(n^(k+2))`` work instead of ``n^(2k)``. Viterbi
needs the maximum over predecessors, which does not distribute over the mixture: its
max-product step reads the dense rows, made once in row blocks (``n^(2k)`` work and
memory) and kept, each block stepped by the dense format's compiled max-product step.

``JointTransition`` is a step operator (``pipeline.operators.StepOperator``): it registers
the three products of the step-operator protocol, so the recursions are
``pipeline.inference``'s, run over it step by step (``pipeline.inference.recursion.
Stepped``), with its conventions: an observation of probability zero keeps the predicted
belief, counts as unobserved in the backward half and makes the evidence ``-inf``.
``smoothing`` gives ``P(x_t | o_0..o_t)`` and ``P(x_t | o_0..o_{T-1})`` over joint states
from one forward-backward run (``ExactResult``: the coupled sweep compares both), ``viterbi``
the most probable joint path; ``marginals`` turns joint beliefs into each chain's.
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import numpy as np

from pipeline.coupled.model import CoupledHMM
from pipeline.inference.decoder import decode
from pipeline.inference.inputs import read_likelihoods, segments
from pipeline.inference.recursion import Stepped
from pipeline.inference.smoother import forward_backward
from pipeline.operators import (
    MaxProduct,
    as_operator,
    backward_product,
    check_entries,
    forward_product,
    max_product,
    row_sums,
)

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

    ``forward(b) = b @ T``, ``backward(v) = T @ v`` (b, v shape (n_joint,), or a batch
    (B, n_joint) of them), ``max_product(w)`` Viterbi's step, ``rows(a, b)`` the dense rows
    ``T[a:b]``, ``toarray()`` all of them.
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
        """``belief @ T``: the distribution of the next joint state, shape (n_joint,); a
        batch (B, n_joint) gives (B, n_joint)."""
        if belief.ndim == 2:
            return np.stack([self.forward(row) for row in belief])
        k, b = self.model.chains, belief.reshape(self.model.sizes)
        out = sum(
            np.einsum(b, list(range(k)), *operands, list(range(k, 2 * k)), optimize=path)
            for operands, path in self._forward
        )
        return out.ravel()

    def backward(self, values: np.ndarray) -> np.ndarray:
        """``T @ values``: the expected value of ``values`` at the next step, shape (n_joint,);
        a batch (B, n_joint) gives (B, n_joint)."""
        if values.ndim == 2:
            return np.stack([self.backward(row) for row in values])
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

    @functools.cached_property
    def _row_blocks(self) -> list[tuple[int, np.ndarray]]:
        """``(start, T[start:stop])`` of every row block: the dense rows, made on the first
        max-product step and kept (``n_joint**2`` entries)."""
        return [(a, self.rows(a, b)) for a, b in self.blocks()]

    def max_product(self, weights: np.ndarray) -> MaxProduct:
        """``max_i weights[i] T[i, j]`` and the least ``i`` attaining it (``pipeline.operators.
        MaxProduct``), block by block of dense rows; ``weights`` (n_joint,) or (B, n_joint)."""
        if weights.ndim == 2:
            parts = [self.max_product(row) for row in weights]
            return MaxProduct(
                np.stack([p.values for p in parts]), np.stack([p.states for p in parts])
            )
        values, states = np.zeros(self.shape[1]), np.zeros(self.shape[1], np.int64)
        for start, rows in self._row_blocks:
            found = max_product(rows, weights[start : start + rows.shape[0]])
            better = found.values > values  # strictly: on a tie the earlier block's row stays
            values[better] = found.values[better]
            states[better] = found.states[better] + start
        return MaxProduct(values, states)


@as_operator.register
def _(T: JointTransition, name: str = "matrix") -> JointTransition:
    return T


@check_entries.register
def _(T: JointTransition, name: str, *, vector: bool = False) -> None:
    """Nothing to check: ``CoupledHMM`` checked every table it mixes."""


@row_sums.register
def _(T: JointTransition) -> np.ndarray:
    return T.backward(np.ones(T.shape[1]))


@forward_product.register
def _(T: JointTransition, beliefs) -> np.ndarray:
    return T.forward(np.asarray(beliefs, dtype=np.float64))


@backward_product.register
def _(T: JointTransition, messages) -> np.ndarray:
    return T.backward(np.asarray(messages, dtype=np.float64))


@max_product.register
def _(T: JointTransition, weights) -> MaxProduct:
    return T.max_product(np.asarray(weights, dtype=np.float64))


class ExactResult(NamedTuple):
    """Exact forward-backward on the joint chain; T steps, N = n_joint.

    filtered : ndarray, shape (T, N)
        ``P(x_t | o_0..o_t)``.
    smoothed : ndarray, shape (T, N)
        ``P(x_t | o_0..o_{T-1})``.
    log_evidence : float
        ``log P(o_0..o_{T-1})``; ``-inf`` when some observation had zero probability.
    zero_evidence : ndarray of int
        The steps whose observation had zero probability (``pipeline.inference.
        SmoothResult.zero_evidence``).
    """

    filtered: np.ndarray
    smoothed: np.ndarray
    log_evidence: float
    zero_evidence: np.ndarray


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
    """Filtered and smoothed joint beliefs and the log evidence (``ExactResult``), by
    ``pipeline.inference``'s forward-backward recursion over ``transition``.

    ``observations``: joint symbols, shape (T,), -1 where nothing is observed.
    """
    T = transition or JointTransition(model)
    observations = np.asarray(observations, dtype=np.int64)
    evidence = read_likelihoods(likelihoods(model, observations), model.n_joint)
    found = forward_backward(Stepped(lambda t: T), model.joint_prior(), evidence, keep=True)
    return ExactResult(found.filtered, found.posteriors, found.log_evidence, found.zero_evidence)


def viterbi(model: CoupledHMM, observations, transition: JointTransition | None = None):
    """The most probable joint path and its log probability ``log P(x_{0:T}, o)``, by
    ``pipeline.inference``'s Viterbi recursion over ``transition`` (ties to the lowest joint
    state, as ``pipeline.inference.viterbi``'s).

    Returns
    -------
    paths : ndarray of int, shape (T, k)
        Each chain's state along the path.
    log_joint : float
        ``-inf`` when some observation had zero probability.
    """
    T = transition or JointTransition(model)
    observations = np.asarray(observations, dtype=np.int64)
    evidence = read_likelihoods(likelihoods(model, observations), model.n_joint)
    found = decode(
        Stepped(lambda t: T), model.joint_prior(), len(observations), segments(evidence), None
    )
    return model.joint_states[found.path], found.log_probability


def marginals(beliefs: np.ndarray, sizes) -> list[np.ndarray]:
    """Each chain's marginals of joint beliefs (T, n_joint): a list of k arrays (T, n_i)."""
    joint = beliefs.reshape(beliefs.shape[0], *sizes)
    k = len(sizes)
    return [joint.sum(axis=tuple(1 + j for j in range(k) if j != i)) for i in range(k)]
