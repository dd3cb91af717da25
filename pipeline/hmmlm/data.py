"""Token sequences for training HMM LMs: a corpus as word ids in fixed-length chunks.

The vocabulary is the corpus's ``n_tokens - 1`` most frequent words plus
``<unk>`` for every other (``pipeline.corpus.vocabulary``). Documents are
split in a fixed order, every tenth to the held-out part, then each part's
words are concatenated and cut into chunks of ``length`` tokens (the last,
shorter chunk is dropped).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from pipeline import corpus as corpora

HELD_OUT_EVERY = 10
"""Every tenth document is held out."""


class Corpus(NamedTuple):
    """A corpus as training and held-out chunks of word ids."""

    train: np.ndarray  # (M, length) int
    held_out: np.ndarray  # (M', length) int
    words: tuple[str, ...]  # (n_tokens,) id -> word; the last is <unk>


def chunks(ids: np.ndarray, length: int) -> np.ndarray:
    """``ids`` cut into rows of ``length``, shape (len(ids) // length, length)."""
    usable = len(ids) // length * length
    return np.asarray(ids[:usable], dtype=np.int64).reshape(-1, length)


def load(corpus: str | os.PathLike | None, n_tokens: int, length: int) -> Corpus:
    """The standard library's English (``corpus`` None) or a text file or folder, as chunks."""
    documents = corpora.documents(corpus)
    words = corpora.vocabulary(documents, n_tokens)
    parts: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    for k, ids in enumerate(corpora.word_ids(documents, words)):
        part = parts[1] if k % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 else parts[0]
        part.append(ids)
    train, held_out = (
        chunks(np.concatenate([np.empty(0, np.int64), *part]), length) for part in parts
    )
    return Corpus(train, held_out, words)
