"""One EM iteration: the E-step (smoothing with expected counts, on the exact model or on an
approximation of it) and the M-step (the full model re-estimated from those statistics).

Sequences are read already (``fit`` checks them): a list of B arrays, ``sequences[b]`` of
``T_b`` steps. The evidence is symbols of ``hmm.emission`` when ``emission`` is None, else
each step's log-likelihoods under the ``Emission`` given (and ``hmm.emission`` is not read).
Sequences of one length are smoothed as one batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference import smoothing
from pipeline.learning.emissions import Emission, symbol_counts
from pipeline.learning.entries import entries, reestimate, values_at
from pipeline.methods import approximate


class Kept(NamedTuple):
    """The entries of the full model an approximate E-step kept (non-zero in the
    approximation), as bool arrays over the learnt entries (``entries.Entries``); None where
    every entry was kept (the exact model, or an ``Emission`` model, never approximated).

    prior : shape (n_states,)
    transition : shape (k,), over ``hmm.transition``'s learnt entries
    emission : shape (k_e,), over ``hmm.emission``'s
    """

    prior: np.ndarray | None
    transition: np.ndarray | None
    emission: np.ndarray | None


EVERYTHING = Kept(None, None, None)
"""What the exact E-step keeps: every entry."""


class Statistics(NamedTuple):
    """What one E-step gives the M-step, over B training sequences of N steps in all.

    log_likelihood : ndarray, shape (B,)
        ``log P(o^b)`` of each sequence under the E-step's model (the approximation, if any);
        ``-inf`` where it rules the sequence out.
    prior : ndarray, shape (n_states,)
        ``sum_b P(S_0 = i | o^b)``.
    transition : ndarray, shape (k,)
        The expected transition counts ``sum_b sum_t P(S_t = i, S_{t+1} = j | o^b)`` at
        ``hmm.transition``'s learnt entries (every entry of a dense matrix, row-major; the
        stored entries of CSR).
    posteriors : ndarray, shape (N, n_states)
        ``P(S_t = i | o^b)`` at every step, the sequences concatenated in order.
    kept : Kept
        The entries the approximation kept (``EVERYTHING`` for the exact model).
    """

    log_likelihood: np.ndarray
    prior: np.ndarray
    transition: np.ndarray
    posteriors: np.ndarray
    kept: Kept


def by_length(sequences: list[np.ndarray]) -> Iterator[np.ndarray]:
    """The indices of the sequences of each length (int, (B_l,)), one group per length."""
    lengths = np.array([len(s) for s in sequences])
    for length in np.unique(lengths):
        yield np.flatnonzero(lengths == length)


def evidence(emission: Emission | None, sequences: list[np.ndarray], members) -> dict:
    """The keyword of ``smoothing``/``filtering`` for the batch ``members`` of one length:
    ``observations`` (B_l, T) for symbols, else ``log_likelihoods`` (B_l, T, n_states)."""
    if emission is None:
        return {"observations": np.stack([sequences[b] for b in members])}
    return {"log_likelihoods": np.stack([emission.log_likelihoods(sequences[b]) for b in members])}


def _model(hmm: HMM, method: str | None, setting) -> HMM:
    """The model the E-step smooths: ``hmm``, or its approximation by ``method``."""
    if method is None:
        return hmm
    approximation = approximate(hmm, method, setting)
    if approximation.prune < 1:
        raise ValueError(
            f"{method} prunes the belief (prune={approximation.prune:g}), which smoothing does "
            "not do; allowed: methods that approximate the matrices (topp, topk, lowrank, ...), "
            "or exact EM"
        )
    return approximation.hmm


def e_step(
    hmm: HMM,
    sequences: list[np.ndarray],
    *,
    emission: Emission | None = None,
    method: str | None = None,
    setting=None,
) -> Statistics:
    """The E-step: forward-backward with expected counts (``pipeline.inference.smoothing``)
    on ``hmm`` or, with ``method``, on ``pipeline.methods.approximate(hmm, method, setting)``
    built from ``hmm``'s current parameters.

    ``hmm`` is the full model (its transition, and its emission for symbols, dense or CSR);
    ``emission`` None for symbols of ``hmm.emission``, else the emission model whose
    log-likelihoods the smoothing reads. Returns the ``Statistics`` summed over the sequences.
    """
    model = _model(hmm, method, setting)
    prior = np.zeros(hmm.n_states)
    counts: float | np.ndarray = 0.0
    log_likelihood = np.empty(len(sequences))
    posteriors = [np.empty((0, hmm.n_states))] * len(sequences)
    for members in by_length(sequences):
        smoothed = smoothing(model, **evidence(emission, sequences, members), counts=True)
        counts = counts + values_at(hmm.transition, smoothed.transition_counts)
        prior += smoothed.posteriors[:, 0].sum(axis=0)
        log_likelihood[members] = smoothed.log_evidence
        for b, member in zip(members, smoothed.posteriors, strict=True):
            posteriors[b] = member
    kept = EVERYTHING
    if method is not None:
        kept = Kept(
            model.prior > 0,
            values_at(hmm.transition, model.transition) > 0,
            None if emission is not None else values_at(hmm.emission, model.emission) > 0,
        )
    assert isinstance(counts, np.ndarray), "the counts of at least one sequence"
    return Statistics(log_likelihood, prior, counts, np.concatenate(posteriors), kept)


def m_step(
    hmm: HMM,
    statistics: Statistics,
    observations: np.ndarray,
    *,
    emission: Emission | None = None,
    pseudocount: float = 0.0,
) -> tuple[HMM, Emission | None]:
    """The M-step: the full model re-estimated from ``statistics`` (``entries.reestimate``:
    over the entries the E-step kept, the others held, every row summing to 1).

    ``observations`` (N, ...) are the training sequences concatenated. ``pseudocount`` is
    added to the emission counts of symbols at every entry the E-step kept. Returns the new
    HMM and, for an ``emission`` model, the model's own M-step (``Emission.m_step``; None
    for symbols, whose emission matrix the HMM holds).
    """
    kept = statistics.kept
    prior = reestimate(
        hmm.prior, statistics.prior, kept.prior, np.zeros(hmm.n_states, dtype=np.intp)
    )
    learnt = entries(hmm.transition, "hmm.transition")
    transition = learnt.build(
        reestimate(learnt.values, statistics.transition, kept.transition, learnt.rows)
    )
    if emission is not None:
        learnt_emission = emission.m_step(observations, statistics.posteriors)
        return HMM(prior, transition, hmm.emission), learnt_emission
    symbols = entries(hmm.emission, "hmm.emission")
    counts = symbol_counts(symbols.rows, symbols.columns, observations, statistics.posteriors)
    if pseudocount:
        counts = counts + pseudocount * (1.0 if kept.emission is None else kept.emission)
    matrix = symbols.build(reestimate(symbols.values, counts, kept.emission, symbols.rows))
    return HMM(prior, transition, matrix), None
