"""Token streams for training HMM LMs: a corpus split by document, as streams of word ids.

The split is fixed once and for all by each document's text (``part``): the first 8
bytes of the SHA-256 of its UTF-8 text, as a big-endian integer modulo 10, send it to
``test`` (0), ``validation`` (1) or ``train`` (2 to 9). It does not depend on the
order of the documents or on which others exist, and identical documents (the standard
library repeats many docstrings) always land in the same part, so none is scored on a
text it was trained on. ``split_digest`` names the assignment: every cell of a training
sweep records it, for its model and its baselines alike.

The vocabulary is every word seen at least ``MIN_COUNT`` (2) times in the training part,
ranked by that count (ties alphabetically), then ``<unk>`` for every other word, in every
part; ``n_tokens`` keeps only the ``n_tokens - 1`` most frequent of them. Each part's
documents are concatenated in corpus order and cut into chunks of ``length`` tokens (the
last, shorter chunk is dropped); every model and baseline scores a chunk from its start,
with no context before it.
"""

from __future__ import annotations

import collections
import hashlib
import os
from typing import NamedTuple

import numpy as np

from pipeline import corpus as corpora

PARTS = ("train", "validation", "test")
MIN_COUNT = 2
"""A word is in the vocabulary if the training part has it at least this often."""
DEFAULT_VOCABULARY = 5000
"""Words the default corpus's vocabulary has at least (tested), ``<unk>`` included: the
corpus is the running interpreter's standard library, which some distributions trim (Debian's
Python 3.11 gives 5,868 words, a full CPython 6,000 to 7,000)."""


class Corpus(NamedTuple):
    """A corpus as word ids, one sequence per part (its documents in corpus order)."""

    train: np.ndarray  # (N,) int64
    validation: np.ndarray  # (N_v,) int64
    test: np.ndarray  # (N_t,) int64
    words: tuple[str, ...]  # (V,) id -> word; the last is <unk>
    split: str  # split_digest of the documents' parts


def _fingerprint(document: str) -> bytes:
    return hashlib.sha256(document.encode("utf-8")).digest()


def part(document: str) -> str:
    """The part (``train``, ``validation`` or ``test``) of a document, from its text."""
    bucket = int.from_bytes(_fingerprint(document)[:8], "big") % 10
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def split_digest(documents) -> str:
    """16 hex digits naming which documents are in which part, whatever their order: the
    SHA-256 of the sorted lines ``<document's SHA-256> <part>``."""
    lines = sorted(f"{_fingerprint(doc).hex()} {part(doc)}" for doc in documents)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def vocabulary(documents, n_tokens: int | None = None) -> tuple[str, ...]:
    """The words of ``documents`` (the training part) seen at least ``MIN_COUNT`` times, most
    frequent first (ties alphabetically), at most ``n_tokens - 1`` of them, then ``<unk>``.

    Raises ``ValueError`` (one line) when fewer than ``n_tokens - 1`` words qualify.
    """
    counts = collections.Counter(w for doc in documents for w in corpora.tokenize(doc))
    ranked = sorted(
        (item for item in counts.items() if item[1] >= MIN_COUNT),
        key=lambda item: (-item[1], item[0]),
    )
    if n_tokens is not None and len(ranked) < n_tokens - 1:
        raise ValueError(
            f"the training part has {len(ranked)} words seen at least {MIN_COUNT} times; "
            f"n_tokens={n_tokens} needs {n_tokens - 1} (plus <unk>)"
        )
    kept = ranked if n_tokens is None else ranked[: n_tokens - 1]
    return (*(word for word, _ in kept), corpora.UNKNOWN)


def streams(ids: np.ndarray, count: int, tokens: int | None = None) -> np.ndarray:
    """The first ``tokens`` of ``ids`` (default all) as ``count`` consecutive streams of
    equal length, shape (count, tokens // count); the remainder is dropped."""
    ids = np.asarray(ids if tokens is None else ids[:tokens], dtype=np.int64)
    return ids[: len(ids) // count * count].reshape(count, -1)


def load(corpus: str | os.PathLike | None, n_tokens: int | None) -> Corpus:
    """A corpus of ``pipeline.corpus`` (a name, or a text file or folder; None: the
    standard library's English) split by document, in the training part's vocabulary."""
    documents = corpora.documents(corpus)
    parts = [part(doc) for doc in documents]
    words = vocabulary([d for d, p in zip(documents, parts, strict=True) if p == "train"], n_tokens)
    ids = {name: [np.empty(0, np.int64)] for name in PARTS}
    for where, doc_ids in zip(parts, corpora.word_ids(documents, words), strict=True):
        ids[where].append(doc_ids)
    train, validation, test = (np.concatenate(ids[name]) for name in PARTS)
    return Corpus(train, validation, test, words, split_digest(documents))


def seen_share(train: np.ndarray, held_out: np.ndarray, order: int) -> float:
    """The fraction of the n-grams of ``order`` in the rows of ``held_out`` (S, L) that
    occur word for word in the rows of ``train`` (B, L'): how much of the held-out part an
    n-gram table can recite."""
    seen = {tuple(row[k : k + order]) for row in np.asarray(train).tolist()
            for k in range(len(row) - order + 1)}  # fmt: skip
    grams = [tuple(row[k : k + order]) for row in np.asarray(held_out).tolist()
             for k in range(len(row) - order + 1)]  # fmt: skip
    return sum(gram in seen for gram in grams) / len(grams) if grams else float("nan")
