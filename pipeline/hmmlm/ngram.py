"""Interpolated Kneser-Ney n-gram models: the baselines every HMM LM is measured against.

Chen and Goodman's interpolated Kneser-Ney ("An Empirical Study of Smoothing Techniques
for Language Modeling", 1998), one discount per order. Each chunk of tokens is scored from
its start, after one start symbol ``START`` (as an HMM LM starts each chunk from its
prior). With ``a_m`` the adjusted counts of the m-grams (raw counts at the highest order;
below it, the number of distinct words that precede the m-gram, except that m-grams
beginning with ``START`` keep their raw counts, since nothing precedes them),

    P_m(w | h) = max(a_m(h w) - D_m, 0) / A_m(h) + D_m N_m(h) / A_m(h) P_{m-1}(w | h'),

where ``A_m(h) = sum_w a_m(h w)``, ``N_m(h)`` counts the words w with ``a_m(h w) > 0``, ``h'``
drops the first word of ``h``, ``P_0(w) = 1 / V`` over the V words of the vocabulary, and
a context never seen (``A_m(h) = 0``) passes ``P_{m-1}`` on unchanged. The discount of
order m is ``D_m = n_1 / (n_1 + 2 n_2)`` (Ney, Essen and Kneser), n_r the m-grams of
adjusted count r; 1/2 where no m-gram has count 1. A word's history is at most ``order - 1``
tokens, ``START`` included, so the first word of a chunk is predicted from ``START`` alone.

>>> model = fit(np.array([[0, 1, 0, 1], [1, 0, 2, 0]]), order=2, n_words=3)
>>> round(float(np.exp(log_probabilities(model, np.array([[0, 2, 1]]))).prod()) * 54, 12)
1.0
"""

from __future__ import annotations

import collections
from typing import NamedTuple

import numpy as np

START = -1
"""The token before every chunk (never predicted)."""


class KneserNey(NamedTuple):
    """An interpolated Kneser-Ney model; level ``m - 1`` of each tuple is order m's.

    counts : per order, m-gram (tuple of ids) -> adjusted count ``a_m``.
    contexts : per order, context (the first m - 1 ids) -> ``(A_m, N_m)``.
    discounts : ``D_m`` per order.
    n_words : V, the vocabulary's size (ids ``0 .. V - 1``).
    """

    counts: tuple[dict[tuple[int, ...], int], ...]
    contexts: tuple[dict[tuple[int, ...], tuple[int, int]], ...]
    discounts: tuple[float, ...]
    n_words: int

    @property
    def order(self) -> int:
        return len(self.counts)


def _raw_counts(chunks: np.ndarray, order: int) -> list[collections.Counter]:
    """Per order m, how often each m-gram ends at a word of the chunks (after ``START``)."""
    raw = [collections.Counter() for _ in range(order)]
    for row in np.asarray(chunks).tolist():
        padded = (START, *row)
        for end in range(1, len(padded)):
            for m in range(1, min(order, end + 1) + 1):
                raw[m - 1][padded[end - m + 1 : end + 1]] += 1
    return raw


def _discount(counts: dict) -> float:
    """``n_1 / (n_1 + 2 n_2)`` of the adjusted counts; 1/2 without a count of 1 (a zero
    discount would leave no mass for words unseen in a context)."""
    of = collections.Counter(counts.values())
    n1, n2 = of[1], of[2]
    return n1 / (n1 + 2 * n2) if n1 else 0.5


def fit(chunks: np.ndarray, order: int, n_words: int) -> KneserNey:
    """The interpolated Kneser-Ney model of ``order`` (>= 1) of the chunks (M, length) of
    word ids in ``0 .. n_words - 1``."""
    raw = _raw_counts(chunks, order)
    counts = [dict(raw[-1])]
    for m in range(order - 1, 0, -1):
        preceded = collections.Counter(gram[1:] for gram in raw[m])
        counts.insert(
            0,
            {gram: raw[m - 1][gram] if gram[0] == START else preceded[gram] for gram in raw[m - 1]},
        )
    contexts = []
    for level in counts:
        totals: dict[tuple[int, ...], list[int]] = {}
        for gram, count in level.items():
            entry = totals.setdefault(gram[:-1], [0, 0])
            entry[0] += count
            entry[1] += 1
        contexts.append({h: (total, types) for h, (total, types) in totals.items()})
    return KneserNey(
        tuple(counts), tuple(contexts), tuple(_discount(level) for level in counts), n_words
    )


def probability(model: KneserNey, history: tuple[int, ...], word: int) -> float:
    """``P(word | history)``, ``history`` the tokens before it (``START`` first)."""
    p = 1.0 / model.n_words
    for m in range(1, min(model.order, len(history) + 1) + 1):
        context = history[len(history) - m + 1 :] if m > 1 else ()
        total, types = model.contexts[m - 1].get(context, (0, 0))
        if total:
            discount = model.discounts[m - 1]
            count = model.counts[m - 1].get((*context, word), 0)
            p = max(count - discount, 0.0) / total + discount * types / total * p
    return p


def log_probabilities(model: KneserNey, chunks: np.ndarray) -> np.ndarray:
    """``log P(w_t | START, w_0 .. w_{t-1})`` of every token of the chunks, shape (M, length)."""
    out = np.empty(np.shape(chunks))
    for b, row in enumerate(np.asarray(chunks).tolist()):
        padded = (START, *row)
        for t, word in enumerate(row):
            history = padded[max(0, t + 2 - model.order) : t + 1]
            out[b, t] = np.log(probability(model, history, word))
    return out


def perplexity(model: KneserNey, chunks: np.ndarray) -> float:
    """``exp(-mean log P)`` over every token of the chunks."""
    return float(np.exp(-log_probabilities(model, chunks).mean()))
