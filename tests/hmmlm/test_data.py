"""The corpus split (fixed by each document's text), the vocabulary rule and the chunks."""

import random

import numpy as np
import pytest

from pipeline.corpus import UNKNOWN, stdlib_documents
from pipeline.hmmlm.data import (
    DEFAULT_VOCABULARY,
    load,
    part,
    seen_share,
    split_digest,
    streams,
    vocabulary,
)


def _document(text: str, wanted: str) -> str:
    """``text`` with a number appended (digits are not words) that sends it to ``wanted``."""
    return next(f"{text} {k}" for k in range(1000) if part(f"{text} {k}") == wanted)


def test_a_documents_part_is_fixed_by_its_text():
    # The rule's values on three texts, written down once: a changed rule fails here.
    assert (part("document 0"), part("document 4"), part("document 18")) == (
        "train",
        "test",
        "validation",
    )
    assert part("document 0") == part("document 0") and part("") == "train"


def test_the_split_does_not_depend_on_the_documents_order(tmp_path):
    documents = [f"words of document {k} and more {k}" for k in range(40)]
    shuffled = list(documents)
    random.Random(0).shuffle(shuffled)
    assert split_digest(documents) == split_digest(shuffled)
    assert split_digest(documents) != split_digest(documents[1:])
    for name, texts in (("ordered", documents), ("shuffled", shuffled)):
        folder = tmp_path / name
        folder.mkdir()
        for k, text in enumerate(texts):
            (folder / f"{k:03}.txt").write_text(text)
    first, again = load(tmp_path / "ordered", None), load(tmp_path / "ordered", None)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    other = load(tmp_path / "shuffled", None)
    assert other.split == first.split and other.words == first.words
    for name in ("train", "validation", "test"):
        assert getattr(other, name).size == getattr(first, name).size


def test_the_vocabulary_is_every_word_seen_twice_in_training(tmp_path):
    texts = [
        _document("cat cat dog bird", "train"),
        _document("cat dog emu", "train"),
        _document("fox fox fox cat", "validation"),  # fox: twice, but not in training
        _document("dog gnu", "test"),
    ]
    for k, text in enumerate(texts):
        (tmp_path / f"{k}.txt").write_text(text)
    corpus = load(tmp_path, None)
    # cat 3, dog 2 in training; bird and emu once; fox and gnu never.
    assert corpus.words == ("cat", "dog", UNKNOWN)
    np.testing.assert_array_equal(corpus.train, [0, 0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(corpus.validation, [2, 2, 2, 0])
    np.testing.assert_array_equal(corpus.test, [1, 2])
    assert load(tmp_path, 2).words == ("cat", UNKNOWN)
    with pytest.raises(ValueError, match=r"has 2 words seen at least 2 times; n_tokens=4 needs"):
        load(tmp_path, 4)


def test_streams_are_consecutive_runs_of_the_part():
    ids = np.arange(11)
    np.testing.assert_array_equal(streams(ids, 3), [[0, 1, 2], [3, 4, 5], [6, 7, 8]])
    np.testing.assert_array_equal(streams(ids, 2, tokens=5), [[0, 1], [2, 3]])


def test_the_share_of_held_out_ngrams_seen_in_training():
    train = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    held_out = np.array([[1, 2, 3, 9], [6, 7, 8, 1]])
    # bigrams 12 23 39 67 78 81: 12 23 67 78 seen; trigrams 123 239 678 781: 123 678 seen
    assert seen_share(train, held_out, 2) == pytest.approx(4 / 6)
    assert seen_share(train, held_out, 3) == pytest.approx(2 / 4)
    assert seen_share(train, held_out, 4) == 0


def test_the_default_corpus_splits_into_three_parts_of_its_documents():
    documents = stdlib_documents()
    parts = [part(doc) for doc in documents]
    shares = {name: parts.count(name) / len(parts) for name in ("train", "validation", "test")}
    assert 0.75 < shares["train"] < 0.85 and 0.07 < shares["test"] < 0.13
    words = vocabulary([d for d, p in zip(documents, parts, strict=True) if p == "train"])
    assert DEFAULT_VOCABULARY <= len(words) < 10_000 and words[-1] == UNKNOWN and words[0] == "the"
