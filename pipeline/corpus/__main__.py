"""``python -m pipeline.corpus fetch austen [--source PATH]``: obtain a corpus once.

Without ``--source`` the novels come from ``apt-get download r-cran-janeaustenr`` (no R
needed); ``--source`` names that ``.deb`` or an installed R package folder
(``.../site-library/janeaustenr``) instead. The corpus is kept in
``pipeline.corpus.austen.cache_folder()``. A source or download that cannot be used is
one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.corpus import austen, tokenize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.corpus", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch", help="obtain a corpus once and keep it in the cache")
    fetch.add_argument("corpus", choices=["austen"])
    fetch.add_argument("--source", help="a .deb of r-cran-janeaustenr or an R package folder")
    args = parser.parse_args(argv)
    try:
        folder = austen.fetch(args.source)
    except (OSError, RuntimeError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    documents = austen.documents()
    words = sum(len(tokenize(doc)) for doc in documents)
    print(f"austen: {len(documents)} documents, {words:,} words, in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
