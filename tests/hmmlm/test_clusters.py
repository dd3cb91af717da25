"""Word clusters: the blocks' layout, the exchange algorithm (a local optimum of Brown et
al.'s class-bigram likelihood, finding the classes of text made by a class bigram model)
and the random partition."""

import numpy as np
import pytest

from pipeline.hmmlm.clusters import (
    bigram_counts,
    blocks_of,
    class_bigram_likelihood,
    clustering,
    exchange,
    random_partition,
)


def test_blocks_put_each_clusters_words_together():
    blocks = blocks_of(np.array([2, 0, 1, 0, 2]), states=3)
    assert (blocks.n_clusters, blocks.n_states, blocks.n_words) == (3, 9, 5)
    assert blocks.order.tolist() == [1, 3, 2, 0, 4] and blocks.starts.tolist() == [0, 2, 3, 5]
    assert blocks.position.tolist() == [0, 0, 0, 1, 1]
    with pytest.raises(ValueError, match="cluster 1 has no word"):
        blocks_of(np.array([0, 2]), states=1)


def _class_bigram_text(seed=0):
    """12 words in 3 classes of 4 ({0..3}, {4..7}, {8..11}); class a is followed by class
    a + 1 (mod 3) nine times in ten, each class's words equally likely."""
    rng = np.random.default_rng(seed)
    classes = [0]
    for _ in range(3999):
        classes.append((classes[-1] + 1) % 3 if rng.random() < 0.9 else rng.integers(3))
    words = 4 * np.array(classes) + rng.integers(0, 4, len(classes))
    return words.reshape(100, 40)


def _same_partition(a, b):
    return len({(x, y) for x, y in zip(a, b, strict=True)}) == len(set(a)) == len(set(b))


def test_exchange_finds_the_classes_of_a_class_bigram_text():
    chunks = _class_bigram_text()
    found = exchange(chunks, 12, 3)
    assert _same_partition(found, np.arange(12) // 4)
    random = random_partition(12, 3, seed=0)
    counts = bigram_counts(chunks, 12)
    assert class_bigram_likelihood(counts, found) > class_bigram_likelihood(counts, random) + 500


def test_exchange_ends_where_no_single_move_raises_the_likelihood():
    rng = np.random.default_rng(1)
    chunks = rng.choice(15, size=(40, 12), p=rng.dirichlet(np.ones(15)))
    cluster = exchange(chunks, 15, 4, passes=50)
    counts = bigram_counts(chunks, 15)
    best = class_bigram_likelihood(counts, cluster)
    for word in range(15):
        if (cluster == cluster[word]).sum() == 1:
            continue  # moving the only word would empty its cluster
        for other in set(range(4)) - {cluster[word]}:
            moved = cluster.copy()
            moved[word] = other
            assert class_bigram_likelihood(counts, moved) <= best + 1e-9, (word, other)


def test_the_random_partition_is_even_and_follows_its_seed():
    a, b = random_partition(10, 3, seed=4), random_partition(10, 3, seed=4)
    np.testing.assert_array_equal(a, b)
    assert sorted(np.bincount(a).tolist()) == [3, 3, 4]
    assert not np.array_equal(a, random_partition(10, 3, seed=5))
    np.testing.assert_array_equal(clustering("random", np.zeros((1, 2), int), 10, 3, 4), a)
    with pytest.raises(ValueError, match="unknown clustering 'brown'; allowed: exchange, random"):
        clustering("brown", np.zeros((1, 2), int), 10, 3)
