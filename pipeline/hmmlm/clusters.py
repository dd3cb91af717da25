"""Word clusters and the blocks of states they own (the blocked emissions of Chiu and
Rush, *Scaling Hidden Markov Language Models*, 2020).

The V words are partitioned into C clusters; cluster c owns the k consecutive states
``c k .. (c + 1) k - 1`` (n = C k), and a state emits only its cluster's words. At a
token of cluster c only those k states can be occupied, so a forward or backward step
reads one k x k block of the transition matrix.

Two partitions of the training words:

- ``exchange``: the class-bigram clustering of Brown et al. ("Class-based n-gram models of
  natural language", 1992) by the exchange algorithm (Kneser and Ney 1993; Martin,
  Liermann and Ney 1998): the same objective as Brown clustering, the likelihood of the
  class bigram model ``sum_{c,d} N(c,d) log N(c,d) - sum_c N(c,.) log N(c,.) - sum_d N(.,d)
  log N(.,d)`` (N the counts of adjacent word pairs, summed over classes), raised by moving
  one word at a time to its best class instead of merging classes bottom up, O(passes C
  bigram types) where Brown's merges cost O(V C^2). Words start in the class of their
  frequency rank modulo C, most frequent first; a pass visits every word in that order
  and moves it where the likelihood rises most; no cluster is left empty.
- ``random``: a uniformly random partition into C clusters of equal size (within one
  word), the comparison the 2020 paper reports beside Brown clusters.

>>> blocks = blocks_of(np.array([1, 0, 1]), states=2)
>>> blocks.n_states, blocks.order.tolist(), blocks.position.tolist()
(4, [1, 0, 2], [0, 0, 1])

Its namesake ``pipeline.sweep.config.clusters`` is about Dask clusters; these are clusters
of words.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

CLUSTERINGS = ("exchange", "random")
"""The word clusterings a training sweep takes (``training.clustering``)."""


class Blocks(NamedTuple):
    """Words in C clusters, each owning ``states`` consecutive hidden states.

    cluster : (V,) int64, the cluster of each word.
    position : (V,) int64, the index of each word among its cluster's words.
    order : (V,) int64, the words sorted by cluster (then by id).
    starts : (C + 1,) int64, cluster c's words are ``order[starts[c]:starts[c + 1]]``.
    states : k, the states of each cluster.
    """

    cluster: np.ndarray
    position: np.ndarray
    order: np.ndarray
    starts: np.ndarray
    states: int

    @property
    def n_clusters(self) -> int:
        return len(self.starts) - 1

    @property
    def n_states(self) -> int:
        return self.n_clusters * self.states

    @property
    def n_words(self) -> int:
        return len(self.cluster)


def blocks_of(cluster: np.ndarray, states: int) -> Blocks:
    """The blocks of the word clusters ``cluster`` (V,) (ids 0 to C - 1, none empty),
    each owning ``states`` states."""
    cluster = np.asarray(cluster, dtype=np.int64)
    order = np.argsort(cluster, kind="stable")
    sizes = np.bincount(cluster)
    if (sizes == 0).any():
        raise ValueError(f"cluster {int(np.flatnonzero(sizes == 0)[0])} has no word")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    position = np.empty_like(order)
    position[order] = np.arange(len(order)) - starts[cluster[order]]
    return Blocks(cluster, position, order, starts, states)


def random_partition(n_words: int, n_clusters: int, seed: int = 0) -> np.ndarray:
    """The cluster (V,) of each word in a uniformly random partition into equal clusters."""
    cluster = np.empty(n_words, dtype=np.int64)
    cluster[np.random.default_rng(seed).permutation(n_words)] = np.arange(n_words) % n_clusters
    return cluster


@numba.njit(cache=True, nogil=True)
def _xlogx(x):
    return x * np.log(x) if x > 0 else 0.0


@numba.njit(cache=True, nogil=True)
def _class_counts(indptr, indices, data, cluster, word, out, touched):
    """Add row ``word`` of a CSR word-count matrix into ``out`` (C,) by class; the classes
    touched are appended to ``touched`` (returns how many)."""
    count = 0
    for e in range(indptr[word], indptr[word + 1]):
        c = cluster[indices[e]]
        if out[c] == 0.0:
            touched[count] = c
            count += 1
        out[c] += data[e]
    return count


@numba.njit(cache=True, nogil=True)
def _exchange(after, before, cluster, visit, n_clusters, passes):
    """The exchange algorithm over ``after`` (word -> next word counts, CSR arrays) and
    ``before`` (its transpose), moving words of ``visit`` in order; ``cluster`` in place.
    Returns the moves of each pass."""
    C = n_clusters
    V = cluster.size
    pair = np.zeros((C, C))  # N(c, d)
    out_of, into = np.zeros(C), np.zeros(C)  # N(c, .), N(., d)
    size = np.zeros(C, np.int64)
    self_count = np.zeros(V)
    for w in range(V):
        size[cluster[w]] += 1
        for e in range(after[0][w], after[0][w + 1]):
            v = after[1][e]
            pair[cluster[w], cluster[v]] += after[2][e]
            out_of[cluster[w]] += after[2][e]
            into[cluster[v]] += after[2][e]
            if v == w:
                self_count[w] = after[2][e]
    succ, pred = np.zeros(C), np.zeros(C)
    s_touched, p_touched = np.empty(C, np.int64), np.empty(C, np.int64)
    gain = np.empty(C)
    moves = np.zeros(passes, np.int64)
    for sweep in range(passes):
        for w in visit:
            a = cluster[w]
            if size[a] == 1:
                continue
            ns = _class_counts(after[0], after[1], after[2], cluster, w, succ, s_touched)
            np_ = _class_counts(before[0], before[1], before[2], cluster, w, pred, p_touched)
            own = self_count[w]
            # w's pairs with its own class a, w -> w counted once
            succ[a] -= own
            pred[a] -= own
            left, right = 0.0, 0.0
            for x in range(ns):
                left += succ[s_touched[x]]
            for x in range(np_):
                right += pred[p_touched[x]]
            left += own
            right += own
            # remove w from a
            for x in range(ns):
                pair[a, s_touched[x]] -= succ[s_touched[x]]
            for x in range(np_):
                pair[p_touched[x], a] -= pred[p_touched[x]]
            pair[a, a] -= own
            out_of[a] -= left
            into[a] -= right
            size[a] -= 1
            for b in range(C):
                delta = _xlogx(pair[b, b] + succ[b] + pred[b] + own) - _xlogx(pair[b, b])
                for x in range(ns):
                    d = s_touched[x]
                    if d != b:
                        delta += _xlogx(pair[b, d] + succ[d]) - _xlogx(pair[b, d])
                for x in range(np_):
                    c = p_touched[x]
                    if c != b:
                        delta += _xlogx(pair[c, b] + pred[c]) - _xlogx(pair[c, b])
                delta -= _xlogx(out_of[b] + left) - _xlogx(out_of[b])
                delta -= _xlogx(into[b] + right) - _xlogx(into[b])
                gain[b] = delta
            best = a
            for b in range(C):
                if gain[b] > gain[best] + 1e-9:
                    best = b
            # add w to best
            for x in range(ns):
                pair[best, s_touched[x]] += succ[s_touched[x]]
            for x in range(np_):
                pair[p_touched[x], best] += pred[p_touched[x]]
            pair[best, best] += own
            out_of[best] += left
            into[best] += right
            size[best] += 1
            if best != a:
                cluster[w] = best
                moves[sweep] += 1
            for x in range(ns):
                succ[s_touched[x]] = 0.0
            for x in range(np_):
                pred[p_touched[x]] = 0.0
            succ[a] = 0.0
            pred[a] = 0.0
        if moves[sweep] == 0:
            break
    return moves


def bigram_counts(chunks: np.ndarray, n_words: int) -> sp.csr_array:
    """How often word j follows word i within a chunk, (V, V) CSR."""
    chunks = np.asarray(chunks)
    first, second = chunks[:, :-1].ravel(), chunks[:, 1:].ravel()
    counts = sp.coo_array((np.ones(first.size), (first, second)), shape=(n_words, n_words)).tocsr()
    counts.sum_duplicates()
    return counts


def class_bigram_likelihood(counts: sp.csr_array, cluster: np.ndarray) -> float:
    """The exchange algorithm's objective (the module's docstring) for ``cluster``."""
    C = int(cluster.max()) + 1
    member = sp.csr_array(
        (np.ones(cluster.size), (np.arange(cluster.size), cluster)), shape=(cluster.size, C)
    )
    pair = (member.T @ counts @ member).toarray()

    def f(x):
        x = x[x > 0]
        return float((x * np.log(x)).sum())

    return f(pair) - f(pair.sum(axis=1)) - f(pair.sum(axis=0))


def exchange(chunks: np.ndarray, n_words: int, n_clusters: int, passes: int = 10) -> np.ndarray:
    """The cluster (V,) of each word by the exchange algorithm on the chunks' word bigrams
    (at most ``passes`` passes; it stops early when a pass moves no word)."""
    if not 1 <= n_clusters <= n_words:
        raise ValueError(f"n_clusters={n_clusters} must be between 1 and the {n_words} words")
    counts = bigram_counts(chunks, n_words)
    transposed = counts.T.tocsr()
    frequency = np.bincount(np.asarray(chunks).ravel(), minlength=n_words)
    visit = np.argsort(-frequency, kind="stable")
    cluster = np.empty(n_words, dtype=np.int64)
    cluster[visit] = np.arange(n_words) % n_clusters
    csr = (counts.indptr.astype(np.int64), counts.indices.astype(np.int64), counts.data)
    csc = (transposed.indptr.astype(np.int64), transposed.indices.astype(np.int64), transposed.data)
    _exchange(csr, csc, cluster, visit, n_clusters, passes)
    return cluster


def clustering(
    name: str, chunks: np.ndarray, n_words: int, n_clusters: int, seed: int = 0
) -> np.ndarray:
    """The word clusters of ``CLUSTERINGS`` entry ``name`` (``seed``: the random one's)."""
    if name == "exchange":
        return exchange(chunks, n_words, n_clusters)
    if name == "random":
        return random_partition(n_words, n_clusters, seed)
    raise ValueError(f"unknown clustering {name!r}; allowed: {', '.join(CLUSTERINGS)}")
