"""Sphinx configuration: the user guide (MyST Markdown), the configuration and results
references generated from the code (``_generated/``, written when the build starts), and the
API reference generated from the docstrings (autosummary, numpy-style sections by napoleon).
The library guide and the tutorial are notebooks (MyST-NB), executed by every build: a cell
that raises fails it.

Build: ``pip install -e ".[docs]"`` then ``sphinx-build -W -b html docs docs/_build/html``.
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
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
"""``.rst`` first: autosummary writes its pages (reStructuredText) with the first suffix whose
parser reads reStructuredText."""
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

nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 300
nb_execution_in_temp = True
"""Every build runs every notebook page (``library``, ``tutorial``) from the start, in a
temporary folder (the tutorial's store goes there); a cell that raises fails the build with
its traceback. The docstrings' examples run in the test suite (``tests/test_docstrings.py``)."""


def setup(app) -> None:
    app.connect("builder-inited", lambda app: write(DOCS / "_generated"))
