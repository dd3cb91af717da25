"""Interpolated and modified Kneser-Ney against cases computed by hand, and normalised in every
context."""

import itertools

import numpy as np
import pytest

from pipeline.hmmlm.ngram import FALLBACK, START, fit, log_probabilities, perplexity, probability

# a b a b / b a c a over the words a, b, c (ids 0, 1, 2); each chunk starts after <s>.
CHUNKS = np.array([[0, 1, 0, 1], [1, 0, 2, 0]])


def test_a_bigram_model_by_hand():
    """Bigrams <s>a 1, ab 2, ba 2, <s>b 1, ac 1, ca 1: n1 = 4, n2 = 2, D2 = 4 / 8. Unigram
    continuation counts (distinct predecessors): a 3 ({<s>, b, c}), b 2, c 1, total 6:
    D1 = 1 / (1 + 2), P1 = (a1 - 1/3) / 6 + (1/3)(3 / 6)(1/3): a 1/2, b 1/3, c 1/6."""
    model = fit(CHUNKS, order=2, n_words=3)
    assert model.discounts == ((1 / 3,) * 3, (1 / 2,) * 3)
    assert [probability(model, (), w) for w in range(3)] == pytest.approx([1 / 2, 1 / 3, 1 / 6])
    # after a: b (2 - 1/2) / 3 + (1/2)(2 / 3) 1/3 = 11/18, c 1/6 + 1/18, a (1/3)(1/2)
    assert [probability(model, (0,), w) for w in range(3)] == pytest.approx(
        [3 / 18, 11 / 18, 4 / 18]
    )
    # a | <s>: (1 - 1/2) / 2 + (1/2)(2 / 2) 1/2; c | a: 4/18; b | c (unseen bigram): (1/2) 1/3
    scores = np.exp(log_probabilities(model, np.array([[0, 2, 1]])))
    np.testing.assert_allclose(scores, [[1 / 2, 4 / 18, 1 / 6]], rtol=1e-13)
    assert perplexity(model, np.array([[0, 2, 1]])) == pytest.approx(54 ** (1 / 3), rel=1e-13)


def test_a_trigram_model_by_hand():
    """Trigrams all once: D3 = 1. Bigram level: <s>a 1 and <s>b 1 keep raw counts; the others
    count their distinct predecessors: ab 2 ({<s>, b}), ba 2 ({a, <s>}), ac 1, ca 1: D2 = 4 / 8.
    """
    model = fit(CHUNKS, order=3, n_words=3)
    assert [d[0] for d in model.discounts] == pytest.approx([1 / 3, 1 / 2, 1])
    assert model.counts[1] == {
        (START, 0): 1,
        (START, 1): 1,
        (0, 1): 2,
        (1, 0): 2,
        (0, 2): 1,
        (2, 0): 1,
    }
    # b | <s>: (1 - 1/2) / 2 + (1/2)(2 / 2) 1/3 = 5/12 (one token of history: bigram level)
    # a | <s> b: 0 + 1 (1 / 1) P2(a | b), P2(a | b) = (2 - 1/2) / 2 + (1/2)(1 / 2) 1/2 = 7/8
    # c | b a: 0 + 1 (2 / 2) P2(c | a), P2(c | a) = (1 - 1/2) / 3 + (1/2)(2 / 3) 1/6 = 2/9
    scores = np.exp(log_probabilities(model, np.array([[1, 0, 2]])))
    np.testing.assert_allclose(scores, [[5 / 12, 7 / 8, 2 / 9]], rtol=1e-13)


def test_a_modified_bigram_model_by_hand():
    """a b a a c a e b a a a b a a c d b c over a .. e (0-4). Bigrams: aa 4, ba 3, ab 2,
    ac 2, and <s>a, ca, ae, eb, cd, db, bc once: n1..n4 = 7, 2, 1, 1, Y = 7/11,
    D(1) = 1 - 2 Y 2/7 = 7/11, D(2) = 2 - 3 Y 1/2 = 23/22, D(3) = 3 - 4 Y = 5/11. Unigram
    continuation counts (distinct predecessors): a 4 ({<s>, a, b, c}), b 3 ({a, d, e}),
    c 2, d 1, e 1, total 11: n1..n4 = 2, 1, 1, 1, Y = 1/2, D = (1/2, 1/2, 1)."""
    row = np.array([[0, 1, 0, 0, 2, 0, 4, 1, 0, 0, 0, 1, 0, 0, 2, 3, 1, 2]])
    model = fit(row, 2, 5, modified=True)
    assert model.discounts[1] == pytest.approx((7 / 11, 23 / 22, 5 / 11), rel=1e-13)
    assert model.discounts[0] == pytest.approx((1 / 2, 1 / 2, 1), rel=1e-13)
    # left over (1/2 2 + 1/2 1 + 1 2) / 11 = 7/22, a fifth each: a (4 - 1) / 11 + 7/110,
    # b (3 - 1) / 11 + 7/110, c (2 - 1/2) / 11 + 7/110, d and e (1 - 1/2) / 11 + 7/110
    unigram = [probability(model, (), w) for w in range(5)]
    assert unigram == pytest.approx(np.array([37, 27, 22, 12, 12]) / 110, rel=1e-13)
    # after a (aa 4, ab 2, ac 2, ae 1: A = 9): left over (7/11 + 2 23/22 + 5/11) / 9 = 35/99;
    # a (4 - 5/11) / 9, b and c (2 - 23/22) / 9, e (1 - 7/11) / 9
    own = np.array([39 / 99, 7 / 66, 7 / 66, 0, 4 / 99])
    expected = own + 35 / 99 * np.array(unigram)
    assert [probability(model, (0,), w) for w in range(5)] == pytest.approx(expected, rel=1e-13)
    assert expected.sum() == pytest.approx(1, rel=1e-13)
    assert fit(row, 2, 5).discounts[1] == (7 / 11,) * 3  # interpolated: Y alone


def test_a_modified_order_without_discounts_in_range_falls_back():
    """One sentence over and over: every bigram seen often, none twice (n2 = 0)."""
    model = fit(np.array([[0, 1, 2, 3] * 6]), 2, 4, modified=True)
    assert model.discounts[1] == FALLBACK


@pytest.mark.parametrize("modified", [False, True])
@pytest.mark.parametrize("order", [2, 3, 4, 5])
def test_every_context_is_a_distribution(order, modified):
    rng = np.random.default_rng(order)
    chunks = rng.choice(6, size=(12, 9), p=[0.4, 0.2, 0.15, 0.1, 0.1, 0.05])
    model = fit(chunks, order=order, n_words=7, modified=modified)  # word 6 never occurs
    histories = {tuple(h) for h in itertools.product(range(7), repeat=order - 1)}
    histories |= {(START, *h[1:]) for h in histories} | {(START,), ()}
    for history in sorted(histories)[:: max(1, len(histories) // 150)]:
        total = sum(probability(model, history, w) for w in range(7))
        assert total == pytest.approx(1.0, abs=1e-12), history
    assert all(probability(model, (START,), w) > 0 for w in range(7))


def test_higher_orders_fit_their_training_text_better():
    rng = np.random.default_rng(0)
    chunks = rng.integers(0, 20, size=(30, 16))
    scores = [perplexity(fit(chunks, order=k, n_words=20), chunks) for k in (2, 3, 4, 5)]
    assert scores == sorted(scores, reverse=True) and scores[-1] < 0.8 * scores[0]
