"""The text corpus reader under its former name: ``pipeline.corpus.read_documents``.

Kept only while the sweep's configuration still imports it from here; import it from
``pipeline.corpus``.
"""

from pipeline.corpus import read_documents

__all__ = ["read_documents"]
