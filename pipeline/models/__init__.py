"""Model families, one module each, and the ``HMM`` container they build.

``HMM`` is defined below this package, in ``pipeline.hmm`` (its docstring says why), and
re-exported here: ``from pipeline.models import HMM, build_model``.

Every family has the interface ``Family`` describes (``pipeline.models.family``):
``build(n_states, seed=0, **params) -> HMM`` and optionally a cheap ``check``,
``size``, ``SEEDED`` and ``GAMMA_EXACT_MAX_STATES``. ``FAMILIES`` holds the built-ins
and the families installed packages add (entry-point group ``pipeline.families``,
``pipeline.plugins``).

>>> from pipeline.models import build_model
>>> build_model("weather", 6).n_states
6
"""

from __future__ import annotations

import inspect

from pipeline.hmm import HMM
from pipeline.limits import check_memory
from pipeline.models import (
    banded_kernel,
    bell,
    dirichlet,
    file,
    hmmlm,
    kernel,
    lm,
    lm_smoothed,
    peaked,
    uniform,
    weather,
)
from pipeline.models.family import Family, Members, ParameterError
from pipeline.plugins import PluginError, Registry

STATE_BYTES = 24
"""The least memory a model takes a state, in any format: its prior (8 bytes a state, always
dense) and at least one stored float64 a row in the transitions and in the emissions."""

BUILTIN: dict[str, Family] = {
    "weather": weather,
    "uniform": uniform,
    "bell": bell,
    "lm": lm,
    "lm_smoothed": lm_smoothed,
    "dirichlet": dirichlet,
    "peaked": peaked,
    "kernel": kernel,
    "banded_kernel": banded_kernel,
    "hmmlm": hmmlm,
    "file": file,
}
"""The built-in families: name -> module."""

FAMILIES = Registry[Family]("model family", "pipeline.families", BUILTIN)
"""Family name -> its ``Family``: the built-ins, then plug-ins (``pipeline.plugins``)."""


def _family(family: str) -> Members:
    """The family of that name, its optional members at their defaults (``Members``);
    ``ValueError`` naming the allowed ones, ``PluginError``."""
    return Members.of(FAMILIES.lookup(family))


def family_parameters(family: str) -> dict[str, object]:
    """The keyword parameters of ``family`` beyond ``n_states`` and ``seed``, with defaults."""
    signature = inspect.signature(_family(family).build)
    return {
        name: parameter.default
        for name, parameter in signature.parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }


def seeded(family: str) -> bool:
    """Whether ``family``'s models depend on the seed (``SEEDED``, default true)."""
    return _family(family).seeded


def gamma_exact_max_states(family: str) -> float:
    """The most states for which ``family``'s exact minimal mixing rate is feasible
    (``GAMMA_EXACT_MAX_STATES``, default unlimited)."""
    return _family(family).gamma_exact_max_states


def fixed_size(family: str, **params) -> int | None:
    """The number of states ``params`` fix (a model read from a file: ``size``), else None."""
    size = _family(family).size
    return None if size is None else int(size(**params))


def check_model(family: str, n_states: int, **params) -> None:
    """Raise ``ParameterError`` naming the parameter at fault for arguments ``build_model``
    rejects (a plug-in's own ``check`` may raise a plain ``ValueError``).

    Cheap: nothing is built and no corpus is read.
    """
    members = _family(family)
    allowed = family_parameters(family)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ParameterError(
            unknown[0],
            f"unknown parameter {unknown[0]!r} for model family {family!r}; "
            f"allowed: {', '.join(allowed) or 'none'}",
        )
    if isinstance(n_states, bool) or int(n_states) != n_states or n_states < 2:
        raise ParameterError("n_states", f"n_states must be an integer >= 2, got {n_states!r}")
    members.check(int(n_states), **params)


def verify_model(family: str, n_states: int, **params) -> None:
    """Raise ``ParameterError`` (or a plug-in's ``ValueError``) unless ``build_model`` makes a
    valid model: the family's ``verify``, which reads what ``build`` reads (a model file in
    full), else its cheap ``check``."""
    check_model(family, n_states, **params)
    _family(family).verify(int(n_states), **params)


def model_bytes(family: str, **params) -> int | None:
    """The memory of ``family``'s model in a worker, from its ``model_bytes`` (a model file's
    headers), or None where the family gives none."""
    estimate = _family(family).model_bytes
    return None if estimate is None else int(estimate(**params))


def model_fingerprint(family: str, **params) -> str | None:
    """What identifies ``family``'s model beyond ``params``: a plug-in's package and version,
    and the family's own ``fingerprint`` (a model file's content hash); None where the
    parameters say it all (a built-in family without a fingerprint)."""
    fingerprint = _family(family).fingerprint
    parts = [FAMILIES.origin(family), None if fingerprint is None else str(fingerprint(**params))]
    found = [part for part in parts if part is not None]
    return ", ".join(found) if found else None


def build_model(family: str, n_states: int, seed: int = 0, **params) -> HMM:
    """Build the HMM of ``family`` with ``n_states`` states, deterministically from ``seed``.

    Families: ``weather`` (Example 1, 6 states), ``uniform`` and ``bell``
    (Section 5), ``lm`` (word bigrams, maximum likelihood or with additive
    smoothing) and ``lm_smoothed`` (the same, smoothed by default),
    ``dirichlet`` (random Dirichlet rows), ``peaked`` (a few random successors on a
    flat background, for very large models), ``kernel`` and ``banded_kernel`` (low-rank
    feature-map transitions, without and with a band: the kernel HMMs of Chiu, Deng and
    Rush), ``hmmlm`` (an HMM LM the training sweep saved), ``file`` (an HMM of your own from
    an ``.npz`` archive), then the plug-ins installed (``FAMILIES``); see each module's
    docstring.
    ``params`` are the family's keyword parameters (``family_parameters``).

    ``ParameterError`` names the argument at fault (``check_model``), and ``n_states`` when
    a model of that many states cannot fit this machine's memory: every model takes at least
    ``STATE_BYTES`` a state (checked here, where the model is built, not in ``check_model``:
    a sweep's workers may have more memory than the machine that checks its config).
    """
    check_model(family, n_states, **params)
    try:
        check_memory(
            STATE_BYTES * int(n_states),
            f"n_states={int(n_states):,}",
            f"{STATE_BYTES} bytes a state, the least any model takes: its prior, and a value "
            "a row of the transitions and of the emissions",
        )
    except ValueError as error:
        raise ParameterError("n_states", str(error)) from None
    return _family(family).build(int(n_states), seed=seed, **params)


__all__ = [
    "FAMILIES",
    "HMM",
    "Family",
    "ParameterError",
    "PluginError",
    "build_model",
    "check_model",
    "family_parameters",
    "fixed_size",
    "gamma_exact_max_states",
    "model_bytes",
    "model_fingerprint",
    "seeded",
    "verify_model",
]
