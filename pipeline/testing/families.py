"""The contract every model family passes, by its registered name (a built-in or a plug-in of
the entry-point group ``pipeline.families``): the ``pipeline.models.Family`` interface
(``check_interface``), models of the size asked for, built deterministically from the seed
(``check_build``), and the sweep's inference on a sequence the model generates
(``check_inference``). ``check_family`` runs them all; each raises ``AssertionError`` naming
what differs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from pipeline.inference import filtering, sample
from pipeline.models import (
    FAMILIES,
    HMM,
    build_model,
    check_model,
    family_parameters,
    fixed_size,
    gamma_exact_max_states,
    seeded,
)
from pipeline.operators import toarray


def check_interface(family: str, n_states: int, **params: Any) -> None:
    """``build`` takes ``n_states`` and ``seed`` and then keyword-only parameters, each with a
    default (they become the config keys ``model.<family>.<param>``); ``params`` are among
    them and pass the family's cheap ``check``; ``GAMMA_EXACT_MAX_STATES`` is positive."""
    build = FAMILIES.lookup(family).build
    signature = inspect.signature(build)
    positional = [
        name
        for name, parameter in signature.parameters.items()
        if parameter.kind is not inspect.Parameter.KEYWORD_ONLY
    ]
    assert positional[:2] == ["n_states", "seed"], f"{family}: build{signature}"
    assert signature.parameters["seed"].default == 0, f"{family}: seed's default is not 0"
    for name, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            assert parameter.default is not inspect.Parameter.empty, f"{family}: {name}"
    unknown = set(params) - set(family_parameters(family))
    assert not unknown, f"{family} has no parameters {sorted(unknown)}"
    check_model(family, n_states, **params)
    assert gamma_exact_max_states(family) > 0, family


ARRAYS = ("prior", "transition", "emission")


def _arrays(hmm: HMM) -> list[np.ndarray]:
    """The prior, transition and emission arrays of ``hmm``, dense."""
    return [hmm.prior, toarray(hmm.transition), toarray(hmm.emission)]


def check_build(family: str, n_states: int, **params: Any) -> None:
    """``build_model`` gives an ``HMM`` of ``n_states`` states (or the size its parameters
    fix, ``size``); the same seed gives the same model to the last bit, and a family that
    is not ``SEEDED`` gives it for every seed."""
    hmm = build_model(family, n_states, seed=0, **params)
    assert isinstance(hmm, HMM), f"{family} built a {type(hmm).__name__}, not an HMM"
    expected = fixed_size(family, **params) or n_states
    assert hmm.n_states == expected, f"{family}: {hmm.n_states} states, not {expected}"
    others = {"seed 0 twice": 0, **({} if seeded(family) else {"not SEEDED, seed 1": 1})}
    for what, seed in others.items():
        other = _arrays(build_model(family, n_states, seed=seed, **params))
        for name, a, b in zip(ARRAYS, _arrays(hmm), other, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"{family}, {what}: {name}")


def check_inference(family: str, n_states: int, **params: Any) -> None:
    """A sequence of 20 symbols the model draws has a finite likelihood under it, and its
    filtered beliefs are distributions over the states."""
    hmm = build_model(family, n_states, seed=0, **params)
    observations = sample(hmm, 19, seed=0).observations
    filtered = filtering(hmm, observations)
    assert np.isfinite(filtered.log_evidence), f"{family}: its own sequence is impossible"
    np.testing.assert_allclose(filtered.beliefs.sum(axis=-1), 1.0, atol=1e-9)
    assert (filtered.beliefs >= 0).all(), family


CHECKS: tuple[Callable[..., None], ...] = (check_interface, check_build, check_inference)
"""Every check of a family, each ``check(family, n_states, **params)``."""


def check_family(family: str, n_states: int = 12, **params: Any) -> None:
    """Run every check of ``CHECKS`` on the family registered as ``family``, at ``n_states``
    states with the keyword ``params``."""
    for check in CHECKS:
        check(family, n_states, **params)
