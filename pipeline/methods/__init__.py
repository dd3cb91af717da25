"""Approximation methods, one module each, behind one interface.

Every method module has ``SETTING`` (what its setting means), a cheap
``check(setting)`` that raises a one-line ``TypeError`` or ``ValueError``
naming the allowed range, and a pure ``approximate(hmm, setting) -> Approximation``:

- ``topp``: top-p transitions (the top-p paper), setting ``p`` in (0, 1];
- ``topk``: top-k transitions (Vithanage et al.), setting ``k``, an integer >= 1;
- ``topp_transitions``, ``topk_transitions``: the same rules on the transitions alone, the
  prior and the emissions exact (Definition 4 truncates all three, so a truncated emission
  can rule an observed symbol out);
- ``topp_states``: belief pruning to the top-p states after every step, setting ``p``;
- ``lowrank``: the rank-r non-negative stochastic fit of the transitions (the kernel HMMs' idea),
  setting ``r``;
- ``banded_lowrank``: the band ``|i - j| < 3`` kept exactly, the rest fitted at rank ``r``.

A built-in method is one module here, registered in ``BUILTIN``, plus its tests;
every method passes the contract suite of ``tests/methods``. Installed packages add
methods with the same interface (``Method``) through the entry-point group
``pipeline.methods`` (``pipeline.plugins``).

>>> from pipeline.methods import approximate
>>> from pipeline.models import build_model
>>> approximation = approximate(build_model("bell", 50), "topk", 5)
>>> approximation.hmm.transition.nnz
250
"""

from __future__ import annotations

from pipeline.hmm import HMM
from pipeline.methods import (
    banded_lowrank,
    lowrank,
    topk,
    topk_transitions,
    topp,
    topp_states,
    topp_transitions,
)
from pipeline.methods.base import Approximation, Method
from pipeline.plugins import PluginError, Registry

BUILTIN: dict[str, Method] = {
    "topp": topp,
    "topk": topk,
    "topp_states": topp_states,
    "topp_transitions": topp_transitions,
    "topk_transitions": topk_transitions,
    "lowrank": lowrank,
    "banded_lowrank": banded_lowrank,
}
"""The built-in methods: name -> module."""

METHODS = Registry[Method]("method", "pipeline.methods", BUILTIN)
"""Method name (the ``method`` coordinate and ``grid.methods`` key) -> its ``Method``: the
built-ins, then plug-ins (``pipeline.plugins``)."""


def _method(method: str) -> Method:
    """The method of that name; ``ValueError`` naming the allowed ones, ``PluginError``."""
    return METHODS.lookup(method)


def check_setting(method: str, setting) -> None:
    """Raise ``ValueError`` (one line, naming the method) for a setting it does not take."""
    try:
        _method(method).check(setting)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{method}: {error}") from None


def approximate(hmm: HMM, method: str, setting) -> Approximation:
    """The ``Approximation`` of ``hmm`` by ``method`` at ``setting``."""
    check_setting(method, setting)
    return _method(method).approximate(hmm, setting)


__all__ = ["METHODS", "Approximation", "Method", "PluginError", "approximate", "check_setting"]
