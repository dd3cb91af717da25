"""Transition and emission matrix formats, and the operations the pipeline needs of them.

Formats, one module each:

- ``dense``: ``numpy.ndarray`` (n, m);
- ``csr``: ``scipy.sparse.csr_array`` (n, m), what top-p and top-k produce (its step
  scatters the entries, and keeps mostly full columns as a dense panel for BLAS);
- ``structured``: ``SparsePlusRankOne``, ``S + outer(u, v)`` kept factored, for
  exact models of 10^5 to 10^6 states that are peaks on a flat background;
- ``lowrank``: ``LowRank``, ``left @ right.T`` with an optional band kept exactly,
  the feature-map transitions of kernel HMMs (Chiu, Deng, Rush, "Scaling Hidden Markov
  Language Models") and the ``lowrank`` methods' fits.

Operations (``pipeline.operators.base``, one ``functools.singledispatch``
function each, registered by every format): ``as_operator``, ``check_entries``,
``row_sums``, ``rows``, ``columns``, ``entries_at``, ``toarray``,
``stored_entries``, ``count_nonzero``, ``step_work``, ``layout`` (what the
compiled recursions read), ``backward_product`` (the backward step ``T @ y``, a gather),
``max_product`` (Viterbi's step) with ``check_max_product``, ``expected_counts``
(smoothing's expected transition counts in the format's own cost), ``least_overlap`` and
``shared_mass`` (the parts of gamma and of the Doeblin bound, ``pipeline.metrics``),
``column_sampler`` (draws from rows without generating them), ``peaks`` and
``row_blocks`` (for row selection). The forward step ``belief @ T`` is
``forward_product``, the compiled step of the format's ``layout``; ``batch_products`` keeps
one matrix's layout for a caller stepping it many times from Python. The three products are
the step-operator protocol (``StepOperator``, ``compiled``) that ``pipeline.inference``
runs its recursions over.

Every matrix enters through ``as_operator`` (or a structured format's constructor), which
checks it before anything reads its entries: real values (``check_real``), and for sparse
input every index array in full (``check_structure``), so the compiled kernels, which run
without bounds checks, never see an index outside the shape. This package is the only
place that asks which format a matrix has: a new format is one module that
registers these, plus its contract tests (``tests/operators``).

>>> import numpy as np
>>> from pipeline.operators import row_sums, toarray
>>> T = np.array([[0.9, 0.1], [0.5, 0.5]])
>>> row_sums(T)
array([1., 1.])
"""

import numpy as np
import scipy.sparse as sp

from pipeline.operators import csr, dense, lowrank, structured  # noqa: F401 - each registers its format
from pipeline.operators.base import (
    DenseRows,
    MaxProduct,
    Peaks,
    Products,
    Sampler,
    SparseRows,
    StepOperator,
    as_operator,
    backward_product,
    batch_products,
    check_entries,
    check_max_product,
    check_real,
    column_sampler,
    columns,
    compiled,
    count_nonzero,
    draw_dense,
    entries_at,
    expected_counts,
    forward_product,
    layout,
    least_overlap,
    max_product,
    peaks,
    row_blocks,
    row_sums,
    rows,
    shared_mass,
    step_work,
    stored_entries,
    toarray,
)
from pipeline.operators.csr import check_structure, entry_rows
from pipeline.operators.lowrank import LowRank
from pipeline.operators.structured import SparsePlusRankOne

Matrix = np.ndarray | sp.csr_array | SparsePlusRankOne | LowRank
"""A transition or emission matrix in any of the formats."""

__all__ = [
    "DenseRows",
    "LowRank",
    "Matrix",
    "MaxProduct",
    "Peaks",
    "Products",
    "Sampler",
    "SparsePlusRankOne",
    "SparseRows",
    "StepOperator",
    "as_operator",
    "backward_product",
    "batch_products",
    "check_entries",
    "check_max_product",
    "check_real",
    "check_structure",
    "column_sampler",
    "columns",
    "compiled",
    "count_nonzero",
    "draw_dense",
    "entries_at",
    "entry_rows",
    "expected_counts",
    "forward_product",
    "layout",
    "least_overlap",
    "max_product",
    "peaks",
    "row_blocks",
    "row_sums",
    "rows",
    "shared_mass",
    "step_work",
    "stored_entries",
    "toarray",
]
