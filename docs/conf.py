"""Sphinx configuration: the user guide (MyST Markdown), the configuration and results
references generated from the code (``_generated/``, written when the build starts), and the
API reference generated from the docstrings (autosummary, numpy-style sections by napoleon).

Build: ``pip install -e ".[docs]"`` then ``sphinx-build -W -b html docs docs/_build/html``;
``-b doctest`` runs every example.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))

from reference_pages import write  # noqa: E402 - the docs folder's own module

import pipeline  # noqa: E402

project = "pipeline"
author = "the pipeline developers"
release = version = pipeline.__version__
copyright = "2026, the pipeline developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "README.md"]
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3
suppress_warnings = ["myst.xref_missing", "ref.python"]
"""Names re-exported by a package (``pipeline.models.HMM``, ``pipeline.hmm.HMM``) make
type annotations ambiguous to resolve: they are shown, not linked."""

autosummary_generate = True
autodoc_default_options = {"members": True, "ignore-module-all": True}
"""Each object is documented in the module that defines it, not again where it is
re-exported."""
templates_path = ["_templates"]
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True

html_theme = "pydata_sphinx_theme"
html_title = f"pipeline {version}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}

doctest_global_setup = "import numpy as np"
doctest_test_doctest_blocks = ""
"""The doctest builder runs the pages' ``doctest`` blocks; the docstrings' examples run in
the test suite (``tests/test_docstrings.py``)."""


def setup(app) -> None:
    app.connect("builder-inited", lambda app: write(DOCS / "_generated"))
