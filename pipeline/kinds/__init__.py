"""Sweep kinds, one folder each: the built-ins' ``config`` (typed settings), ``grid`` (cells),
``tasks`` (what the Dask workers run), ``sweep`` (the ``pipeline.sweep.kind.SweepKind``
interface the engine calls), ``results`` (the store's schema and summary: no Dask, no Hydra)
and ``report`` (figures and Markdown: no Dask, no Hydra); ``docs/development.md``, "A sweep
kind", says what each holds.

The kinds use the engine and the reports, so they sit above both; the registry every layer
looks a kind up in is below them, ``pipeline.results.registry`` (``KINDS``), and names each
built-in kind's folder once, in ``BUILTIN``. Importing a kind's package imports its
``results`` only.
"""
