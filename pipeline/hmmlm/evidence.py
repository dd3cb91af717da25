"""The evidence of token sequences under an HMM LM and the statistics of its gradient.

A batch of B sequences of T tokens runs the scaled forward-backward recursion
with the format's batched products (``pipeline.operators.batch_products``), so a
step costs what the transition format costs: O(n^2) for a dense matrix, O(n F)
for a ``LowRank`` one (and O(n delta) more for its band). The gradient of
``log P(tokens)`` with respect to the transition matrix is
``G = sum_t alpha_{t-1}^T g_t`` (``alpha_{t-1}`` the filtered beliefs, ``g_t``
the emission-weighted backward messages over the scale); it is returned as its
two factors, never as an n x n matrix, so each parameterisation contracts it in
its own cost (``pipeline.hmmlm.parameters``).

A sequence either starts from the prior or continues a stream: then ``carry`` (B, n) is
the belief at the previous segment's last token, and the first step is a transition from
it (a transition of the gradient too).

Why training keeps this recursion rather than calling ``pipeline.inference.smoothing``:
smoothing returns the expected transition counts as one n x n matrix, which the kernel
parameterisations must never form (at 2^14 states it is 2 GiB a batch, and contracting it
costs O(n^2) where the factors cost O(n F)); here the counts stay the two factors
``before`` and ``after``, a batch steps as one ``(B, n)`` product, and a carried segment
starts with a transition. ``tests/hmmlm/test_hmmlm.py`` holds it against
``pipeline.inference.smoothing`` (evidence, emission counts, pair marginals), carried too.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.operators import batch_products


class Statistics(NamedTuple):
    """What the gradient of one batch's log evidence needs.

    Attributes
    ----------
    log_evidence
        float, ``sum over sequences of log P(tokens)``.
    posterior_start
        (n,), ``sum_b P(S_0 | tokens_b)`` (zero when carried).
    emission_counts
        (n, V), ``sum_{b,t} P(S_t = i | tokens_b) [o_t = v]``.
    before
        (N, n), the filtered beliefs ``alpha_{t-1}`` of every transition (N = B (T - 1),
        or B T when carried: the carried belief is the first ``alpha_{t-1}``).
    after
        (N, n), ``g_t = b_t * beta_t / c_t`` of the same transitions, so that the
        gradient with respect to the transition matrix is ``before.T @ after``.
    last
        (B, n), the belief at each sequence's last token (the next segment's carry).
    """

    log_evidence: float
    posterior_start: np.ndarray
    emission_counts: np.ndarray
    before: np.ndarray
    after: np.ndarray
    last: np.ndarray


def _forward(prior, step, likelihood, carry=None) -> tuple[np.ndarray, np.ndarray]:
    """Filtered beliefs ``alpha`` (B, T, n) and scales ``c`` (B, T) of the forward recursion
    with the product ``step`` over the emission likelihoods ``likelihood`` (B, T, n), from
    the prior (n,) or, if given, a step from ``carry`` (B, n)."""
    B, steps, n = likelihood.shape
    alpha = np.empty((B, steps, n))
    scale = np.empty((B, steps))
    start = prior[None, :] if carry is None else step(carry)
    current = start * likelihood[:, 0]
    for t in range(steps):
        if t:
            current = step(alpha[:, t - 1]) * likelihood[:, t]
        scale[:, t] = current.sum(axis=1)
        alpha[:, t] = current / scale[:, t, None]
    return alpha, scale


def log_evidence(prior: np.ndarray, T, emission: np.ndarray, tokens: np.ndarray, carry=None):
    """``sum over sequences of log P(tokens)`` by the forward recursion alone, and the last
    beliefs (B, n) (arguments as for ``statistics``)."""
    alpha, scale = _forward(prior, batch_products(T).forward, emission.T[tokens], carry)
    return float(np.log(scale).sum()), alpha[:, -1]


def statistics(
    prior: np.ndarray, T, emission: np.ndarray, tokens: np.ndarray, carry=None
) -> Statistics:
    """The scaled forward-backward recursion over a batch of token sequences.

    Parameters
    ----------
    prior : (n,) ``P(S_0)``.
    T : (n, n) row-stochastic, in any format (dense and ``LowRank`` are what the
        parameterisations make).
    emission : (n, V) ``P(token | state)``, dense.
    tokens : (B, T) int in ``0..V - 1``.
    carry : (B, n) the beliefs carried into the sequences; None: they start from the prior.
    """
    likelihood = emission.T[tokens]  # (B, T, n)
    step = batch_products(T)
    alpha, scale = _forward(prior, step.forward, likelihood, carry)
    B, steps, n = alpha.shape
    beta = np.empty((B, steps, n))
    beta[:, -1] = 1.0
    after = np.empty((B, steps, n))
    for t in range(steps - 1, -1, -1):
        after[:, t] = likelihood[:, t] * beta[:, t] / scale[:, t, None]
        if t:
            beta[:, t - 1] = step.backward(after[:, t])
    posterior = alpha * beta
    counts = np.zeros((n, emission.shape[1]))
    np.add.at(counts.T, tokens.ravel(), posterior.reshape(-1, n))
    if carry is None:
        before, after, start = alpha[:, :-1], after[:, 1:], posterior[:, 0].sum(axis=0)
    else:
        before, start = np.concatenate([carry[:, None], alpha[:, :-1]], axis=1), np.zeros(n)
    return Statistics(
        float(np.log(scale).sum()),
        start,
        counts,
        before.reshape(-1, n),
        after.reshape(-1, n),
        alpha[:, -1],
    )
