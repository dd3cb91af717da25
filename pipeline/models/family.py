"""What a model family is: the ``Family`` interface and its ``ParameterError``.

Every built-in family is a module with this interface, and so is a plug-in family
(entry-point group ``pipeline.families``, see ``pipeline.plugins``).

Its namesake ``pipeline.coupled.family`` is one family (the coupled chains), which has this
interface.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pipeline.hmm import HMM


class ParameterError(ValueError):
    """A parameter a family rejects: one line saying what is allowed; ``parameter`` names it
    (``n_states`` or a keyword of ``build``), so a config layer can name the key at fault."""

    def __init__(self, parameter: str, message: str):
        super().__init__(message)
        self.parameter = parameter


class Family(Protocol):
    """A model family: HMMs of any number of states, built deterministically from a seed.

    Required:

    - ``build(n_states, seed=0, **params) -> HMM``: the model; its parameters beyond
      ``n_states`` and ``seed`` are keyword-only with defaults (they become the config keys
      ``model.<family>.<param>``, typed by their annotations).

    Optional (the default in brackets):

    - ``check(n_states, **params)``: raise ``ParameterError`` (or ``ValueError``) for values
      ``build`` rejects, cheaply, before any model is built [no check];
    - ``size(**params) -> int``: the number of states the parameters fix, for a model read
      from a file [any number];
    - ``SEEDED``: whether models depend on ``seed`` [True]; one that does not is built once
      for every seed of a sweep;
    - ``GAMMA_EXACT_MAX_STATES``: the most states for which the exact minimal mixing rate
      is affordable [no limit]; above it the Doeblin lower bound stands in;
    - ``verify(n_states, **params)``: raise ``ParameterError`` unless ``build`` would make a
      valid model, reading what it reads (a model file's matrices, in full); a sweep runs
      it once per model before any cluster starts [``check`` is enough];
    - ``model_bytes(**params) -> int``: the model's memory in a worker, estimated without
      building it, for a family whose size its parameters fix [measured by building small
      models];
    - ``fingerprint(**params) -> str``: what identifies the model beyond its parameters (a
      model file's content hash), kept in a sweep store's identity [the parameters alone].
    """

    # ``*args: Any, **params: Any`` stands for a family's own keyword-only parameters: a type
    # checker takes it for any ``build`` that starts with ``n_states`` and ``seed``
    def build(self, n_states: int, seed: int = 0, *args: Any, **params: Any) -> HMM: ...


def _nothing(n_states: int, **params: Any) -> None:
    """What a family without ``check`` or ``verify`` checks: nothing beyond ``build``'s own."""


@dataclass(frozen=True)
class Members:
    """A family's module read once (``of``), its optional members at their defaults
    (``Family`` lists them): the one place that reads what a family may leave out."""

    build: Callable[..., HMM]
    check: Callable[..., None] = _nothing
    verify: Callable[..., None] = _nothing
    size: Callable[..., int] | None = None  # None: any number of states
    model_bytes: Callable[..., int] | None = None  # None: measured by building small models
    fingerprint: Callable[..., str] | None = None  # None: the parameters say it all
    seeded: bool = True
    gamma_exact_max_states: float = float("inf")

    @staticmethod
    def of(family: Any) -> Members:
        """The members of a family module (or any object with the ``Family`` interface)."""
        given = {name: getattr(family, name) for name in _OPTIONAL if hasattr(family, name)}
        return Members(
            build=family.build,
            **given,
            **{name.lower(): getattr(family, name) for name in _FLAGS if hasattr(family, name)},
        )


_OPTIONAL = ("check", "verify", "size", "model_bytes", "fingerprint")
"""A family's optional functions (``Family``)."""

_FLAGS = ("SEEDED", "GAMMA_EXACT_MAX_STATES")
"""A family's optional constants (``Family``), ``Members``' fields in lower case."""
