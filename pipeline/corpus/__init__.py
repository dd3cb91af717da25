"""Text corpora as documents, words and word ids: what the bigram LM family
(``pipeline.models.lm``) and HMM LM training (``pipeline.hmmlm.data``) both read.

Named corpora (``CORPORA``):

- ``stdlib``, the default: the English inside the Python standard library, found on
  every machine without a download: the help texts of ``pydoc_data.topics`` and the
  docstrings of the standard-library modules (modules, classes and functions, read with
  ``ast`` without importing anything; test suites and site-packages left out). It depends
  on the Python version, which result stores record. Its docstrings repeat long phrases,
  so n-gram models recite much of any held-out part: a smoke-test corpus.
- ``austen``: Jane Austen's six novels, a document per chapter
  (``pipeline.corpus.austen``), fetched once with ``python -m pipeline.corpus fetch
  austen``.

Any text file or folder can replace them (``documents``).

Words are lower-cased runs of letters (``tokenize``); the vocabulary of ``n``
states is the ``n - 1`` most frequent words plus ``UNKNOWN`` for every other
(``vocabulary``), and ``word_ids`` writes documents in it.

>>> vocabulary(["the cat and the dog"], 3)
('the', 'and', '<unk>')
>>> word_ids(["the dog"], ("the", "and", "<unk>"))[0].tolist()
[0, 2]
"""

from __future__ import annotations

import ast
import collections
import functools
import os
import re
import sys
import sysconfig
from pathlib import Path

import numpy as np

from pipeline.corpus import austen

CORPORA = ("stdlib", "austen")
"""The corpora ``documents`` knows by name; any other name is a path."""
WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")
UNKNOWN = "<unk>"
"""The state (or token) of every word outside the vocabulary: the vocabulary's last."""
_SKIPPED_DIRECTORIES = {"site-packages", "test", "tests", "idle_test", "__pycache__"}


def tokenize(text: str) -> list[str]:
    """Lower-cased words: runs of letters, with inner apostrophes (``don't``)."""
    return WORD.findall(text.lower())


def _docstrings(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docs = (ast.get_docstring(node) for node in ast.walk(tree) if isinstance(node, kinds))
    return [doc for doc in docs if doc]


def _stdlib_sources() -> list[Path]:
    """The ``.py`` files of the standard library's own modules, in a fixed order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for folder, directories, names in os.walk(root):
        relative = Path(folder).relative_to(root).parts
        if relative and relative[0] not in sys.stdlib_module_names:
            directories[:] = []
            continue
        directories[:] = sorted(d for d in directories if d not in _SKIPPED_DIRECTORIES)
        for name in sorted(names):
            module = name.removesuffix(".py")
            if name.endswith(".py") and (relative or module in sys.stdlib_module_names):
                files.append(Path(folder, name))
    return files


@functools.lru_cache(maxsize=1)
def stdlib_documents() -> tuple[str, ...]:
    """The default corpus: pydoc topic texts, then every stdlib docstring."""
    from pydoc_data import topics

    documents = [topics.topics[key] for key in sorted(topics.topics)]
    for path in _stdlib_sources():
        documents.extend(_docstrings(path.read_text(encoding="utf-8", errors="replace")))
    return tuple(documents)


def read_documents(corpus: str | os.PathLike) -> tuple[str, ...]:
    """The documents of a text file (one document) or a folder (every UTF-8 file in it).

    Files that are not valid UTF-8 are skipped, so a folder may hold other things.
    """
    path = Path(corpus)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
    else:
        raise FileNotFoundError(
            f"corpus {str(corpus)!r} does not exist; give a text file or a folder of text files"
        )
    documents = []
    for file in files:
        try:
            documents.append(file.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            continue
    return tuple(documents)


def documents(corpus: str | os.PathLike | None = None) -> tuple[str, ...]:
    """The documents of ``corpus``: a name of ``CORPORA`` (None: ``stdlib``), else the text
    file or folder it names (``read_documents``).

    Raises ``FileNotFoundError`` (one line) for ``austen`` before it is fetched, naming the
    command that fetches it.
    """
    if corpus is None or corpus == "stdlib":
        return stdlib_documents()
    if corpus == "austen":
        return austen.documents()
    return read_documents(corpus)


def vocabulary(documents, n_states: int) -> tuple[str, ...]:
    """The state names: the ``n_states - 1`` most frequent words (ties alphabetically), then
    ``UNKNOWN``.

    Raises ``ValueError`` when the corpus has fewer than ``n_states - 1`` word types.
    """
    frequency = collections.Counter(w for doc in documents for w in tokenize(doc))
    if len(frequency) < n_states - 1:
        raise ValueError(
            f"the lm corpus has {len(frequency)} word types; n_states={n_states} needs at "
            f"least {n_states - 1} (n_states - 1 words plus the unknown-word state)"
        )
    ranked = sorted(frequency.items(), key=lambda item: (-item[1], item[0]))
    return (*(word for word, _ in ranked[: n_states - 1]), UNKNOWN)


def word_ids(documents, words: tuple[str, ...]) -> list[np.ndarray]:
    """Each document as the ids of its words in ``words`` (int64, one array per document,
    empty ones included); a word not in ``words`` is the last id, ``UNKNOWN``'s."""
    index = {word: i for i, word in enumerate(words)}
    unknown = len(words) - 1
    return [
        np.array([index.get(w, unknown) for w in tokenize(doc)], dtype=np.int64)
        for doc in documents
    ]
