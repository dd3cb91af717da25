import numpy as np
import pytest

from pipeline.corpus import UNKNOWN, documents, stdlib_documents, tokenize, vocabulary, word_ids


def test_tokenize_keeps_inner_apostrophes_and_lowers_case():
    assert tokenize("Don't STOP-me, 'now' x2") == ["don't", "stop", "me", "now", "x"]


def test_vocabulary_ranks_by_frequency_then_alphabetically():
    texts = ["b a c", "c b d"]
    assert vocabulary(texts, 4) == ("b", "c", "a", UNKNOWN)
    assert vocabulary(texts, 5) == ("b", "c", "a", "d", UNKNOWN)
    with pytest.raises(ValueError, match=r"4 word types; n_states=6 needs at least 5 \("):
        vocabulary(texts, 6)


def test_word_ids_map_other_words_to_the_unknown_state():
    words = ("b", "c", UNKNOWN)
    ids = word_ids(["b a c", "", "zz b"], words)
    assert [doc.tolist() for doc in ids] == [[0, 2, 1], [], [2, 0]]
    assert all(doc.dtype == np.int64 for doc in ids)


def test_documents_are_the_standard_library_by_default_or_the_files_given(tmp_path):
    assert documents() is stdlib_documents()
    (tmp_path / "a.txt").write_text("one")
    (tmp_path / "b.txt").write_text("two")
    assert documents(tmp_path) == ("one", "two")
    assert documents(tmp_path / "a.txt") == ("one",)
    with pytest.raises(FileNotFoundError, match=r"corpus '.*nowhere' does not exist"):
        documents(tmp_path / "nowhere")


def test_default_corpus_is_large_enough_for_the_paper():
    words = vocabulary(stdlib_documents(), 7620)
    assert len(words) == 7620 and words[-1] == UNKNOWN and "the" in words[:5]
