"""The compiled (numba) kernels: plain loops over arrays, no formats, no validation.

- ``forward``: the forward recursion over a horizon, with one step function per
  matrix layout (dense, CSR, CSR plus rank one, low rank), for one sequence or a batch,
  with optional belief pruning;
- ``backward``: the backward step of each layout (a gather, ``T @ y``) and the backward
  recursion of smoothing;
- ``maxproduct``: the max-product step of each layout and the Viterbi recursion;
- ``draw``: inverse-CDF draws from the stored entries of CSR rows;
- ``select``: per-row selection for top-p (a mass to reach) and top-k (a count), and
  the checked targets a ``p`` or a ``k`` becomes (``mass_target``, ``count_target``);
- ``gamma``: the minimal mixing rate's pair search and the Doeblin bound.

Callers (``pipeline.operators``, ``pipeline.methods``, ``pipeline.inference``)
check their inputs and pick the kernel; kernels trust what they are given.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from numba.core.decorators import _JITOptions

    class JitOptions(_JITOptions, total=False):
        """The options the kernels compile with, given to ``numba.njit`` and as
        ``jit_options`` to ``numba.extending.overload``, which takes ``cache`` as well
        (numba's own type of those options leaves it out)."""

        cache: bool
