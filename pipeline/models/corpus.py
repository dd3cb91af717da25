"""English text for the LM family, found on every machine without a download.

The default corpus is the English inside the Python standard library: the
help texts of ``pydoc_data.topics`` and the docstrings of the standard-library
modules (modules, classes and functions, read with ``ast`` without importing
anything; test suites and site-packages left out). It depends on the Python
version, which result stores record. Any text file or folder can replace it.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
import sysconfig
from pathlib import Path

WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")
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
