"""A word-bigram language-model HMM like the top-p paper's 7620-state LM HMM.

States are the ``n - 1`` most frequent word types of a corpus (ties broken
alphabetically) plus one unknown-word state for every other word
(``pipeline.corpus.vocabulary``).
Transitions are bigram counts ``C`` within documents with additive (Lidstone)
smoothing:

    T[i, j] = (C[i, j] + alpha) / (sum_k C[i, k] + alpha * n).

``alpha = 0`` is the maximum-likelihood bigram model, the simplest reading of
the paper's "very simple language model": a row keeps only the successors
seen in the corpus. A word never followed by another within a document (the
last word of a document, and nothing else) has no count to normalise; its row
is the document-start distribution (how often each state begins a document):
the chain starts a new document, so it stays row-stochastic and gamma stays
meaningful.

The prior is the unigram distribution of the corpus; emissions are the
identity (the observation is the word itself). The corpus is the standard
library's English (``pipeline.corpus``) unless ``corpus`` names a text
file or folder. The family has no randomness: ``seed`` is ignored.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from pipeline import corpus as corpora
from pipeline.corpus import vocabulary
from pipeline.hmm import HMM
from pipeline.models.family import ParameterError
from pipeline.operators import SparsePlusRankOne, toarray

SEEDED = False
"""The model is a function of the corpus alone: every seed gives the same HMM."""


class Counts(NamedTuple):
    """What the LM is made of, over the states ``words``."""

    unigrams: np.ndarray  # (n,): how often each state's words occur
    bigrams: sp.csr_array  # (n, n): how often a word of state j follows one of state i
    starts: np.ndarray  # (n,): how many documents begin with each state


def counts(documents, words: tuple[str, ...]) -> Counts:
    """Unigram, within-document bigram and document-start counts over the states ``words``."""
    ids = [doc for doc in corpora.word_ids(documents, words) if doc.size]
    n = len(words)
    unigrams = np.bincount(np.concatenate(ids), minlength=n).astype(np.float64)
    previous = np.concatenate([doc[:-1] for doc in ids])
    following = np.concatenate([doc[1:] for doc in ids])
    bigrams = sp.coo_array((np.ones(previous.size), (previous, following)), shape=(n, n)).tocsr()
    bigrams.sum_duplicates()
    starts = np.bincount([doc[0] for doc in ids], minlength=n).astype(np.float64)
    return Counts(unigrams, bigrams, starts)


def check(
    n_states: int, *, corpus: str | None = None, alpha: float = 0.01, structured: bool = False
) -> None:
    """Raise ``ParameterError`` unless ``alpha >= 0`` and ``corpus`` (if given) exists; cheap,
    reads no text.

    Whether the corpus has enough word types is only known once it is read (``build``).
    """
    if not alpha >= 0:
        raise ParameterError("alpha", f"the lm family needs alpha >= 0, got alpha={alpha}")
    if corpus is not None and not os.path.exists(corpus):
        raise ParameterError(
            "corpus",
            f"corpus {str(corpus)!r} does not exist; give a text file or a folder of text files",
        )


def build(
    n_states: int,
    seed: int = 0,
    *,
    corpus: str | None = None,
    alpha: float = 0.01,
    structured: bool = False,
) -> HMM:
    """The bigram LM HMM with ``n_states`` states (see the module docstring).

    Parameters
    ----------
    n_states : int
        Number of states: ``n_states - 1`` words plus the unknown-word state.
    seed : int
        Ignored: the model is a deterministic function of the corpus.
    corpus : str, optional
        A text file or a folder of text files; default the standard library's English.
    alpha : float
        Pseudo-count added to every bigram count, >= 0. The default 0.01
        maximises the held-out bigram likelihood of the default corpus (every
        tenth document held out, alpha on a log grid from 1e-4 to 1), the
        textbook way to set add-k smoothing; it was not chosen to match the
        paper. 0 is the maximum-likelihood model (see the module docstring).
    structured : bool
        Keep the transitions sparse: counts plus the rank-one smoothing term
        (``SparsePlusRankOne``), or CSR for ``alpha = 0``; exact steps then cost
        O(bigrams + n), not O(n^2).
    """
    check(n_states, corpus=corpus, alpha=alpha, structured=structured)
    documents = corpora.documents(corpus)
    words = vocabulary(documents, n_states)
    found = counts(documents, words)
    transition = _smoothed(found, alpha) if alpha > 0 else _maximum_likelihood(found)
    if not structured:
        transition = toarray(transition)
    emission = sp.csr_array(sp.identity(n_states, format="csr"))
    return HMM(found.unigrams / found.unigrams.sum(), transition, emission)


def _smoothed(found: Counts, alpha: float) -> SparsePlusRankOne:
    """``(C + alpha) / (row sums + alpha n)`` as counts plus a rank-one term."""
    n = found.unigrams.size
    denominators = np.asarray(found.bigrams.sum(axis=1)).ravel() + alpha * n
    scaled = sp.diags_array(1.0 / denominators) @ found.bigrams
    return SparsePlusRankOne(scaled, alpha / denominators, np.ones(n))


def _maximum_likelihood(found: Counts) -> sp.csr_array:
    """``C / row sums``, and the document-start distribution for rows without counts."""
    totals = np.asarray(found.bigrams.sum(axis=1)).ravel()
    empty = totals == 0
    rows = sp.diags_array(np.where(empty, 0.0, 1.0 / np.where(empty, 1.0, totals))) @ found.bigrams
    restart = sp.csr_array(empty[:, None] * (found.starts / found.starts.sum())[None, :])
    return sp.csr_array(rows + restart)
