"""Names for the arrays of the public API, each with its shape: ``typing.Annotated`` over
``numpy.ndarray``, so a signature says what an array holds and how it is laid out.

The shape rides along as the annotation's metadata (a string, as the docstrings write
shapes) and checks nothing: to a type checker each alias is ``numpy.ndarray``. The letters:
``n_states`` states, ``T`` steps of a sequence (``horizon + 1`` for a prediction or a
sample), ``B`` sequences of a batch, ``k`` any count. A sparse or structured matrix has no
alias: its shape and format are said in words (``pipeline.operators.Matrix``).
"""

from __future__ import annotations

from typing import Annotated

import numpy as np

Vector = Annotated[np.ndarray, "(n_states,)"]
"""float64, shape (n_states,): one value per state, e.g. a distribution ``P(S_0 = i)``."""

Beliefs = Annotated[np.ndarray, "(T, n_states)"]
"""float64, shape (T, n_states): a distribution over the states at every step, row ``t`` for
step ``t`` (filtered, predicted or smoothed)."""

BatchBeliefs = Annotated[np.ndarray, "(B, T, n_states)"]
"""float64, shape (B, T, n_states): ``Beliefs`` of each member of a batch."""

Observations = Annotated[np.ndarray, "(T,)"]
"""int64, shape (T,): the symbol observed at every step (a column of the emission matrix),
-1 where none was."""

BatchObservations = Annotated[np.ndarray, "(B, T)"]
"""int64, shape (B, T): ``Observations`` of each member of a batch."""

StatePath = Annotated[np.ndarray, "(T,)"]
"""int64, shape (T,): the state at every step, each in ``0..n_states - 1``."""

BatchStatePaths = Annotated[np.ndarray, "(B, T)"]
"""int64, shape (B, T): a ``StatePath`` per member of a batch."""

PerStep = Annotated[np.ndarray, "(T,)"]
"""float64, shape (T,): one number per step (a time, a pruned mass)."""

BatchPerStep = Annotated[np.ndarray, "(B, T)"]
"""float64, shape (B, T): ``PerStep`` of each member of a batch."""

PerSequence = Annotated[np.ndarray, "(B,)"]
"""float64, shape (B,): one number per member of a batch (its log evidence)."""

Steps = Annotated[np.ndarray, "(k,)"]
"""int, shape (k,): the indices of some steps, ascending (e.g. those whose observation
had zero probability)."""
