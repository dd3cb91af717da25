"""Token sequences for training HMM LMs: a corpus as word ids in fixed-length chunks.

The vocabulary is the corpus's ``n_tokens - 1`` most frequent words plus
``<unk>`` for every other (``pipeline.models.lm.vocabulary``). Documents are
split in a fixed order, every tenth to the held-out part, then each part's
words are concatenated and cut into chunks of ``length`` tokens (the last,
shorter chunk is dropped).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from pipeline.models import corpus as corpora
from pipeline.models.lm import UNKNOWN, vocabulary

HELD_OUT_EVERY = 10
"""Every tenth document is held out."""


class Corpus(NamedTuple):
    """A corpus as training and held-out chunks of word ids."""

    train: np.ndarray  # (M, length) int
    held_out: np.ndarray  # (M', length) int
    words: tuple[str, ...]  # (n_tokens,) id -> word; the last is <unk>


def chunks(ids: list[int], length: int) -> np.ndarray:
    """``ids`` cut into rows of ``length``, shape (len(ids) // length, length)."""
    usable = len(ids) // length * length
    return np.asarray(ids[:usable], dtype=np.int64).reshape(-1, length)


def load(corpus: str | os.PathLike | None, n_tokens: int, length: int) -> Corpus:
    """The standard library's English (``corpus`` None) or a text file or folder, as chunks."""
    documents = corpora.stdlib_documents() if corpus is None else corpora.read_documents(corpus)
    words = vocabulary(documents, n_tokens)
    index = {word: k for k, word in enumerate(words)}
    unknown = index[UNKNOWN]
    parts: tuple[list[int], list[int]] = ([], [])
    for k, document in enumerate(documents):
        part = parts[1] if k % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 else parts[0]
        part.extend(index.get(word, unknown) for word in corpora.tokenize(document))
    return Corpus(chunks(parts[0], length), chunks(parts[1], length), words)
