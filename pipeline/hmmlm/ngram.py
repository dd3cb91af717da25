"""Kneser-Ney n-gram models: the baselines every HMM LM is measured against.

Chen and Goodman's interpolated Kneser-Ney and modified Kneser-Ney ("An Empirical Study
of Smoothing Techniques for Language Modeling", 1998). Each row of tokens (a stream) is
scored from its start, after one start symbol ``START`` (as an HMM LM starts each stream
from its prior). With ``a_m`` the adjusted counts of the m-grams (raw counts at the
highest order; below it, the number of distinct words that precede the m-gram, except
that m-grams beginning with ``START`` keep their raw counts, since nothing precedes them),

    P_m(w | h) = max(a_m(h w) - D_m(a_m(h w)), 0) / A_m(h)
                 + (D_m(1) N1_m(h) + D_m(2) N2_m(h) + D_m(3) N3_m(h)) / A_m(h) P_{m-1}(w | h'),

where ``A_m(h) = sum_w a_m(h w)``, ``N1_m(h)``, ``N2_m(h)`` and ``N3_m(h)`` count the words
w with ``a_m(h w)`` 1, 2 and 3 or more, ``D_m(c)`` is the discount of a count c (that of 3
for any c >= 3), ``h'`` drops the first word of ``h``, ``P_0(w) = 1 / V`` over the V words
of the vocabulary, and a context never seen (``A_m(h) = 0``) passes ``P_{m-1}`` on
unchanged. With n_r the m-grams of adjusted count r and ``Y = n_1 / (n_1 + 2 n_2)``:

- interpolated Kneser-Ney: one discount ``D_m(c) = Y`` (Ney, Essen and Kneser);
- modified Kneser-Ney: three, ``D_m(1) = 1 - 2 Y n_2 / n_1``, ``D_m(2) = 2 - 3 Y n_3 / n_2``,
  ``D_m(3) = 3 - 4 Y n_4 / n_3``.

Y is 1/2 where no m-gram has count 1 (a zero discount would leave no mass for words unseen
in a context). Where an order's counts leave a modified discount undefined (an n_r of
zero) or outside ``0 < D(r) < r`` (small or repetitive texts), that order takes
``FALLBACK`` instead, as KenLM's ``--discount_fallback`` does. A word's history is at
most ``order - 1`` tokens, ``START`` included, so the first word of a row is predicted from
``START`` alone.

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
FALLBACK = (0.5, 1.0, 1.5)
"""The modified discounts of an order whose counts give none in range (KenLM's default)."""


class KneserNey(NamedTuple):
    """A Kneser-Ney model; level ``m - 1`` of each tuple is order m's.

    counts : per order, m-gram (tuple of ids) -> adjusted count ``a_m``.
    contexts : per order, context (the first m - 1 ids) -> ``(A_m, N1_m, N2_m, N3_m)``.
    discounts : per order, ``(D_m(1), D_m(2), D_m(3))`` (three equal ones: interpolated).
    n_words : V, the vocabulary's size (ids ``0 .. V - 1``).
    """

    counts: tuple[dict[tuple[int, ...], int], ...]
    contexts: tuple[dict[tuple[int, ...], tuple[int, int, int, int]], ...]
    discounts: tuple[tuple[float, float, float], ...]
    n_words: int

    @property
    def order(self) -> int:
        return len(self.counts)


def _raw_counts(chunks: np.ndarray, order: int) -> list[collections.Counter]:
    """Per order m, how often each m-gram ends at a word of the chunks (after ``START``)."""
    raw: list[collections.Counter] = [collections.Counter() for _ in range(order)]
    for row in np.asarray(chunks).tolist():
        padded = (START, *row)
        for end in range(1, len(padded)):
            for m in range(1, min(order, end + 1) + 1):
                raw[m - 1][padded[end - m + 1 : end + 1]] += 1
    return raw


def _discounts(counts: dict, modified: bool) -> tuple[float, float, float]:
    """``(D(1), D(2), D(3))`` of one order's adjusted counts (the module's docstring)."""
    n = collections.Counter(counts.values())
    y = n[1] / (n[1] + 2 * n[2]) if n[1] else 0.5
    if not modified:
        return y, y, y
    if not all(n[r] for r in (1, 2, 3)):
        return FALLBACK
    d1, d2, d3 = (r - (r + 1) * y * n[r + 1] / n[r] for r in (1, 2, 3))
    out = (d1, d2, d3)
    return out if all(0 < d < r for r, d in zip((1, 2, 3), out, strict=True)) else FALLBACK


def fit(chunks: np.ndarray, order: int, n_words: int, modified: bool = False) -> KneserNey:
    """The Kneser-Ney model of ``order`` (>= 1) of the rows ``chunks`` (M, length) of word
    ids in 0 to n_words - 1: interpolated, or ``modified``."""
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
            entry = totals.setdefault(gram[:-1], [0, 0, 0, 0])
            entry[0] += count
            entry[min(count, 3)] += 1
        contexts.append({h: (a, n1, n2, n3) for h, (a, n1, n2, n3) in totals.items()})
    discounts = tuple(_discounts(level, modified) for level in counts)
    return KneserNey(tuple(counts), tuple(contexts), discounts, n_words)


def probability(model: KneserNey, history: tuple[int, ...], word: int) -> float:
    """``P(word | history)``, ``history`` the tokens before it (``START`` first)."""
    p = 1.0 / model.n_words
    for m in range(1, min(model.order, len(history) + 1) + 1):
        context = history[len(history) - m + 1 :] if m > 1 else ()
        total, *types = model.contexts[m - 1].get(context, (0, 0, 0, 0))
        if total:
            discount = model.discounts[m - 1]
            count = model.counts[m - 1].get((*context, word), 0)
            own = max(count - discount[min(count, 3) - 1], 0.0) if count else 0.0
            left = sum(d * n for d, n in zip(discount, types, strict=True))
            p = own / total + left / total * p
    return p


def log_probabilities(model: KneserNey, chunks: np.ndarray) -> np.ndarray:
    """``log P(w_t | START, w_0, ..., w_{t-1})`` of every token of the rows, shape (M, length)."""
    out = np.empty(np.shape(chunks))
    for b, row in enumerate(np.asarray(chunks).tolist()):
        padded = (START, *row)
        for t, word in enumerate(row):
            history = padded[max(0, t + 2 - model.order) : t + 1]
            out[b, t] = np.log(probability(model, history, word))
    return out


def perplexity(model: KneserNey, chunks: np.ndarray) -> float:
    """``exp(-mean log P)`` over every token of the rows."""
    return float(np.exp(-log_probabilities(model, chunks).mean()))
