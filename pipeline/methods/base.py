"""What an approximation method is (``Method``) and what it returns (``Approximation``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pipeline.hmm import HMM
from pipeline.kernels.select import TOLERANCE


@dataclass(frozen=True, eq=False)
class Approximation:
    """An exact model's approximation: the model and pruning its runs use, and their errors.

    The approximate run is ``filtering(approximation.hmm, observations,
    prune=approximation.prune)``, whatever the method: methods that change the
    matrices return a new ``hmm``; methods that change the inference return the
    exact ``hmm`` and a pruning mass.

    Parameters
    ----------
    hmm : HMM
        The model the approximate run advances.
    prune : float in (0, 1]
        The belief pruning mass of the run (1: no pruning).
    prior_error : float
        ``TV(P_0, Q_0)`` between the exact and the approximate prior.
    row_error : ndarray, shape (n_states,)
        ``eps_i = TV(T_i, Q_i)`` between each exact transition row and the
        approximate one (zeros where the method keeps the exact transitions).
    """

    hmm: HMM
    prune: float
    prior_error: float
    row_error: np.ndarray

    @property
    def prune_error(self) -> float:
        """The most TV one belief pruning can add: ``1 - prune`` (0 without pruning)."""
        return 0.0 if self.prune >= 1 else 1.0 - self.prune + TOLERANCE

    @property
    def step_error(self) -> float:
        """The most TV one step can add to the prediction error, whatever the belief:
        ``max_i eps_i`` plus the pruning's; the ``eps`` of the bounds."""
        return float(self.row_error.max(initial=0.0)) + self.prune_error

    @property
    def start_error(self) -> float:
        """The most TV the prior can carry into step 0: its own error plus the pruning's."""
        return self.prior_error + self.prune_error


class Method(Protocol):
    """An approximation method: every built-in method module has this interface, and so
    does a plug-in method (entry-point group ``pipeline.methods``, see ``pipeline.plugins``).

    - ``SETTING``: the name of the method's one number (``"p"`` for top-p, ``"k"`` for top-k);
    - ``check(setting)``: raise a one-line ``TypeError`` or ``ValueError`` naming the allowed
      range for a setting ``approximate`` rejects; cheap, before any model is built;
    - ``approximate(hmm, setting) -> Approximation``: pure; the bounds a sweep stores come
      from the ``Approximation``'s errors, so they hold for any method that fills them in
      honestly (``row_error``: each row's ``TV(T_i, Q_i)``).
    """

    SETTING: str

    def check(self, setting: float) -> None: ...

    def approximate(self, hmm: HMM, setting: float) -> Approximation: ...
