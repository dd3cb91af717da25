"""The transitions a recursion steps through, and the recursions over them: compiled, or a
Python loop over step operators.

Every function of ``pipeline.inference`` reads the transition through a recursion object,
which runs three recursions over a segment of steps, each with the arguments and outputs
of its compiled kernel:

- ``forward`` (``forward_block`` for a batch): filtering (``pipeline.kernels.forward``);
- ``backward``: smoothing's backward half (``pipeline.kernels.backward``);
- ``viterbi``: the scaled max-product recursion (``pipeline.kernels.maxproduct``);

and answers for the matrices of the steps: ``counts`` (the expected transition counts),
``moves`` (the entries a path takes) and ``sampler`` (draws of the next states).

``Compiled`` holds a constant transition of a compiled format (``pipeline.operators.
compiled``: dense, CSR, ``SparsePlusRankOne``, ``LowRank``): the kernels run its whole
horizon in one compiled loop. ``Stepped`` runs the same recursions step by step in Python,
asking ``transition(t)`` for the operator of ``P(S_{t+1} | S_t)`` and taking its products
through the step-operator protocol (``pipeline.operators.forward_product``,
``backward_product``, ``max_product``): transitions that change with time, and a transition
that is not a compiled matrix (the coupled joint chain's contraction). Its arithmetic is the
kernels', step for step, but for its sums, which are numpy's (pairwise, where the kernels add
in order): the two agree to rounding, and a zero-evidence step is handled alike (the
prediction kept, the step marked, counted as unobserved by the backward half).

Time-varying transitions (``transitions=`` of the inference functions; dynamax's
``transition_matrix`` of shape (T - 1, K, K)): ``transitions[t]`` moves step ``t`` to step
``t + 1``, ``t = 0..T - 2``, given as

- an array of shape (T - 1, n_states, n_states);
- a sequence of T - 1 operators, each a matrix in any format of ``pipeline.operators`` or a
  ``StepOperator``;
- a callable ``t -> operator``, asked for step ``t``'s when the recursion reaches it (by
  each half of smoothing, and again where a recursion recomputes from checkpoints).

Each is checked as ``HMM`` checks its transition (``pipeline.hmm.normalised_rows``), the
error naming the step: an array's or a sequence's before the recursion starts, a callable's
operators as it returns them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pipeline.hmm import HMM, normalised_rows, precision, row_sum_tolerance, validate_rows
from pipeline.kernels import backward, forward, maxproduct
from pipeline.kernels.select import prune
from pipeline.operators import (
    Matrix,
    StepOperator,
    as_operator,
    backward_product,
    check_max_product,
    check_real,
    column_sampler,
    entries_at,
    expected_counts,
    forward_product,
    max_product,
)

Transition = Callable[[int], Any]
"""``transition(t)``: the operator of ``P(S_{t+1} | S_t)`` (a matrix or a ``StepOperator``)."""


def _read_only(array: np.ndarray) -> np.ndarray:
    """``array``, or a read-only view of it: the kernels take their inputs (the prior, the
    rows of the likelihoods) read-only, so numba compiles one specialisation whether a
    caller's array was writable or not (an HMM's are not, a copy's are)."""
    if not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view


class Compiled:
    """A constant transition ``matrix`` of a compiled format and its ``layout``
    (``HMM.transition_layout``): every recursion is its compiled kernel."""

    def __init__(self, matrix: Matrix, layout: tuple):
        self.matrix = matrix
        self.layout = layout

    def forward(self, initial, likelihoods, rows, target, beliefs, elapsed, zero, pruned,
                resume, log_evidence, start=0) -> float:  # fmt: skip
        """``pipeline.kernels.forward.forward`` (``start``, the first step's index, is for
        ``Stepped``: a constant transition does not read it)."""
        return forward.forward(
            self.layout,
            _read_only(initial),
            likelihoods,
            _read_only(rows),
            target,
            beliefs,
            elapsed,
            zero,
            pruned,
            forward.step_threads(self.layout),
            resume,
            log_evidence,
        )

    def forward_block(self, initial, likelihoods, rows, target, beliefs, elapsed, zero, pruned,
                      log_evidence) -> None:  # fmt: skip
        """``pipeline.kernels.forward.forward_block``."""
        forward.forward_block(
            self.layout,
            _read_only(initial),
            likelihoods,
            _read_only(rows),
            target,
            beliefs,
            elapsed,
            zero,
            pruned,
            log_evidence,
        )

    def backward(self, likelihoods, rows, zero, alphas, posteriors, message, last, after,
                 start=0) -> None:  # fmt: skip
        """``pipeline.kernels.backward.backward``."""
        backward.backward(
            self.layout, likelihoods, _read_only(rows), zero, alphas, posteriors, message, last,
            after,
        )  # fmt: skip

    def viterbi(self, initial, likelihoods, rows, first, delta, back, zero, total,
                start=0) -> float:  # fmt: skip
        """``pipeline.kernels.maxproduct.viterbi``."""
        return maxproduct.viterbi(
            self.layout, _read_only(initial), likelihoods, _read_only(rows), first, delta, back,
            zero, total,
        )  # fmt: skip

    def counts(self, before: list[np.ndarray], after: list[np.ndarray]) -> Matrix:
        """The expected transition counts of the pairs of each sequence (``before[b]``,
        ``after[b]``, (T - 1, n) each) summed: ``expected_counts`` of the matrix."""
        return expected_counts(self.matrix, _joined(before), _joined(after))

    def moves(self, path: np.ndarray) -> np.ndarray:
        """``T[path[t], path[t + 1]]`` for ``t = 0..T - 2``, shape (T - 1,)."""
        return entries(self.matrix, path[:-1], path[1:])

    def sampler(self, t: int):
        """Draws of step ``t + 1``'s states from step ``t``'s (``column_sampler``), made once."""
        return self._sampler

    @functools.cached_property
    def _sampler(self):
        return column_sampler(self.matrix)


class Stepped:
    """The recursions over ``transition(t)``, one step at a time in Python.

    ``stacked``: the transitions were given as one array (T - 1, n, n), and ``counts``
    returns one array of each step's counts, (T - 1, n, n), as dynamax's ``trans_probs``;
    otherwise a tuple of each step's, in its operator's format.
    """

    def __init__(self, transition: Transition, *, stacked: bool = False):
        self.transition = transition
        self.stacked = stacked

    def forward(self, initial, likelihoods, rows, target, beliefs, elapsed, zero, pruned,
                resume, log_evidence, start=0) -> float:  # fmt: skip
        """``pipeline.kernels.forward.forward`` over the steps from ``start`` to ``start + T' - 1``:
        the belief of step ``start + t`` is the one before it moved by
        ``transition(start + t - 1)``, then conditioned and pruned."""
        began = time.monotonic()
        n, history = initial.size, beliefs.shape[0]
        work, mark = np.empty(n, np.int64), np.zeros(n, np.bool_)
        for t in range(rows.size):
            belief = beliefs[t % history]
            if t > 0:
                belief[:] = self._forward(start + t - 1, beliefs[(t - 1) % history])
            elif resume:
                belief[:] = self._forward(start - 1, initial)
            else:
                belief[:] = initial
            if rows[t] >= 0:
                product = belief * likelihoods[rows[t]]
                evidence = product.sum()
                if evidence > 0.0:
                    belief[:] = product / evidence
                    log_evidence += np.log(evidence)
                else:  # the prediction is kept
                    zero[t] = True
                    log_evidence = -np.inf
            pruned[t] = prune(belief, target, work, mark)
            elapsed[t] = time.monotonic() - began
        return log_evidence

    def forward_block(self, initial, likelihoods, rows, target, beliefs, elapsed, zero, pruned,
                      log_evidence) -> None:  # fmt: skip
        """``pipeline.kernels.forward.forward_block``: B sequences as a state-major block
        (n, B), each step one batched product."""
        began = time.monotonic()
        (n, size), history = initial.shape, beliefs.shape[0]
        work, mark = np.empty(n, np.int64), np.zeros(n, np.bool_)
        for t in range(elapsed.size):
            block = beliefs[t % history]
            if t == 0:
                block[:] = initial
            else:
                block[:] = self._forward(t - 1, beliefs[(t - 1) % history].T).T
            members = np.flatnonzero(rows[:, t] >= 0)
            product = block[:, members] * likelihoods[rows[members, t]].T
            evidence = product.sum(axis=0)
            possible = evidence > 0.0
            block[:, members[possible]] = product[:, possible] / evidence[possible]
            log_evidence[members[possible]] += np.log(evidence[possible])
            zero[members[~possible], t] = True
            log_evidence[members[~possible]] = -np.inf
            if target <= 1.0:  # pruning sorts each member: one column at a time
                for b in range(size):
                    member = block[:, b].copy()
                    pruned[b, t] = prune(member, target, work, mark)
                    block[:, b] = member
            elapsed[t] = time.monotonic() - began

    def backward(self, likelihoods, rows, zero, alphas, posteriors, message, last, after,
                 start=0) -> None:  # fmt: skip
        """``pipeline.kernels.backward.backward`` over the steps from ``start`` to
        ``start + T' - 1``: step ``start + t``'s message gathered through
        ``transition(start + t)``."""
        steps, n = alphas.shape
        counts = after.shape[0] > 0
        beta = np.empty(n)
        for t in range(steps - 1, -1, -1):
            alpha = alphas[t]
            if t == steps - 1 and last:
                beta[:] = 1.0
                posteriors[t] = alpha
                if counts:
                    after[t] = 0.0
            else:
                gathered = backward_product(self.operator(start + t), message)
                total = (alpha * gathered).sum()
                top = gathered.max()
                if total > 0.0:
                    posteriors[t] = alpha * gathered / total
                else:  # the messages underflowed: the filtered belief is what is left
                    posteriors[t] = alpha
                if counts:
                    after[t] = message / total if total > 0.0 else 0.0
                beta[:] = gathered / top if top > 0.0 else 1.0
            weighed = beta if zero[t] or rows[t] < 0 else beta * likelihoods[rows[t]]
            top = weighed.max()
            message[:] = weighed / top if top > 0.0 else weighed

    def viterbi(self, initial, likelihoods, rows, first, delta, back, zero, total,
                start=0) -> float:  # fmt: skip
        """``pipeline.kernels.maxproduct.viterbi`` over the steps from ``start`` to
        ``start + T' - 1``: step ``start + t``'s maxima from the step before through
        ``transition(start + t - 1)``."""
        for t in range(rows.size):
            if t == 0 and first:
                current = initial.copy()
            else:
                operator = self.operator(start + t - 1)
                check_max_product(operator)
                found = max_product(operator, delta)
                current = found.values
                back[t] = found.states
            if rows[t] >= 0:
                weighed = current * likelihoods[rows[t]]
                if weighed.max() > 0.0:
                    current = weighed
                else:
                    zero[t] = True
            top = current.max()
            delta[:] = current / top
            total += np.log(top)
        return total

    def counts(self, before: list[np.ndarray], after: list[np.ndarray]):
        """Each step's expected transition counts ``P(S_t = i, S_{t+1} = j | o)``, summed
        over the sequences (``before[b]``, ``after[b]``, (T - 1, n) each): a tuple of T - 1
        matrices in their operators' formats, or one array (T - 1, n, n) when ``stacked``."""
        steps = before[0].shape[0]
        found = tuple(
            expected_counts(
                self.operator(t),
                np.stack([part[t] for part in before]),
                np.stack([part[t] for part in after]),
            )
            for t in range(steps)
        )
        if self.stacked:
            return np.stack(found) if found else np.empty((0, *before[0].shape[1:] * 2))
        return found

    def moves(self, path: np.ndarray) -> np.ndarray:
        """``transition(t)[path[t], path[t + 1]]`` for ``t = 0..T - 2``, shape (T - 1,)."""
        return np.array(
            [
                entries(self.operator(t), path[t : t + 1], path[t + 1 : t + 2])[0]
                for t in range(path.size - 1)
            ]
        )

    def sampler(self, t: int):
        """Draws of step ``t + 1``'s states from step ``t``'s (``column_sampler``)."""
        return column_sampler(self.operator(t))

    def operator(self, t: int) -> StepOperator:
        """The operator of ``P(S_{t+1} | S_t)``."""
        return self.transition(t)

    def _forward(self, t: int, beliefs: np.ndarray) -> np.ndarray:
        return forward_product(self.operator(t), beliefs)


def recursion(hmm: HMM, transitions, steps: int) -> Compiled | Stepped:
    """The recursions over ``hmm.transition`` (``transitions`` None) or over time-varying
    ``transitions`` (the module's docstring says in which forms) for a sequence of ``steps``
    steps, with ``hmm.n_states`` states; ``hmm.transition`` is then not read."""
    if transitions is None:
        return Compiled(hmm.transition, hmm.transition_layout)
    return read_transitions(transitions, hmm.n_states, steps)


def read_transitions(transitions, n_states: int, steps: int) -> Stepped:
    """``transitions`` checked as the transitions of ``steps`` steps of ``n_states`` states:
    ``ValueError`` in one line naming the step, the entry or the row at fault."""
    if isinstance(transitions, np.ndarray):
        return Stepped(_read_array(transitions, n_states, steps).__getitem__, stacked=True)
    if isinstance(transitions, Sequence) and not isinstance(transitions, str):
        if len(transitions) != steps - 1:
            raise ValueError(
                f"transitions has {len(transitions)} steps; a sequence of {steps} steps takes "
                f"{steps - 1}, one per move from step t to t + 1"
            )
        checked: dict[int, StepOperator] = {}  # an operator given for many steps, checked once
        operators = []
        for t, value in enumerate(transitions):
            if id(value) not in checked:
                checked[id(value)] = _checked(value, f"transitions[{t}]", n_states)
            operators.append(checked[id(value)])
        return Stepped(operators.__getitem__)
    if callable(transitions):
        return Stepped(lambda t: _checked(transitions(t), f"transitions({t})", n_states))
    raise ValueError(
        f"transitions is a {type(transitions).__name__}; allowed: an array ({steps - 1}, "
        f"{n_states}, {n_states}), a sequence of {steps - 1} operators, or a callable t -> "
        "operator"
    )


def _read_array(values: np.ndarray, n: int, steps: int) -> np.ndarray:
    """An array of transitions (T - 1, n, n) checked in one pass; given in float32 or float16,
    each row divided by its float64 sum (as ``HMM`` reads a matrix)."""
    check_real(values, "transitions")
    given = precision(values)
    array = np.ascontiguousarray(values, dtype=np.float64)
    if array.shape != (steps - 1, n, n):
        raise ValueError(
            f"transitions has shape {array.shape}; a sequence of {steps} steps of {n} states "
            f"takes ({steps - 1}, {n}, {n})"
        )
    with np.errstate(invalid="ignore"):
        sums = array.sum(axis=2)
        off = np.abs(sums - 1.0) > row_sum_tolerance(given, n)
        wrong = (~np.isfinite(array) | (array < 0)).any(axis=(1, 2)) | off.any(axis=1)
    if wrong.any():
        t = int(np.argmax(wrong))
        validate_rows(f"transitions[{t}]", array[t], dtype=given)  # raises, naming it
    if given.itemsize < 8:
        array /= sums[:, :, None]
    return array


def _checked(value, name: str, n: int) -> StepOperator:
    """One step's operator in its canonical format, checked as ``HMM`` checks a transition."""
    operator = as_operator(value, name)
    if operator.shape != (n, n):
        raise ValueError(
            f"{name} has shape {operator.shape}; with {n} states it must be ({n}, {n})"
        )
    return normalised_rows(name, operator, precision(value))


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def entries(T, row: np.ndarray, column: np.ndarray) -> np.ndarray:
    """``entries_at`` that reads nothing for no positions (a one-step path): scipy's sparse
    indexing does not take empty index arrays alike in every format."""
    return entries_at(T, row, column) if row.size else np.empty(0)
