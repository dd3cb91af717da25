"""The compiled (numba) kernels: plain loops over arrays, no formats, no validation.

- ``forward``: the forward recursion over a horizon, with one step function per
  matrix layout (dense, CSR, CSR plus rank one), for one sequence or a batch,
  with optional belief pruning;
- ``select``: per-row selection for top-p (a mass to reach) and top-k (a count);
- ``gamma``: the minimal mixing rate's pair search and the Doeblin bound.

Callers (``pipeline.operators``, ``pipeline.methods``, ``pipeline.inference``)
check their inputs and pick the kernel; kernels trust what they are given.
"""
