"""``ring_mixing``: a sweep kind of its own, how fast the ring walk forgets where it started.

A cell is one ``(n_states, reach)``: the ring family's transition matrix, its minimal mixing
rate gamma, and the TV between the walks started at state 0 and at state n/2 after t steps,
which the contraction of Boyen and Koller bounds by ``(1 - gamma)^t``. The kind is this
folder, as a built-in kind is (``pipeline.kinds.<kind>``): ``results`` (its store's schema),
``sweep`` (its settings, cells and tasks, small enough for one module) and ``report``.
"""

from pipeline.results.registry import Kind
from ringhmm.mixing.results import SCHEMA

KIND = Kind(SCHEMA, sweep="ringhmm.mixing.sweep", report="ringhmm.mixing.report:analyze")
"""What the entry point ``pipeline.kinds: ring_mixing`` names."""
