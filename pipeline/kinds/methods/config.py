"""The methods kind's settings, its section ``methods``: ``grid`` (families and sizes,
methods and their settings, seeds, modes, the horizon), ``model`` (every family's
parameters), ``timing``, and the limits on exact references and on fused tasks, every
field's meaning in its docstring (``--help``, the reference). Their top-level places of
the old layout are still accepted, with a deprecation line (``pipeline.sweep.config.moved``).
"""

from __future__ import annotations

import functools
import re
import typing
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Optional

from pipeline.kinds.methods import modes
from pipeline.methods import METHODS
from pipeline.models import BUILTIN as BUILTIN_FAMILIES
from pipeline.models import FAMILIES, family_parameters
from pipeline.sweep.config.reference import parameter_docs
from pipeline.sweep.config.validation import choices, optional, ranged


def _methods() -> str:
    return (
        f"a mapping of methods ({', '.join(METHODS.names())}) to non-empty lists of their settings"
    )


@dataclass
class GridConfig:
    """The experiment grid; every list is one dimension of the results."""

    families: list[str] = choices(lambda: ["bell", "uniform", "dirichlet"], FAMILIES.names)
    """Model families to sweep: built-ins (``pipeline.models``) and installed plug-ins."""
    n_states: Any = choices(
        None,
        "a list of integers >= 2, or a mapping of families to such lists; null only for families "
        "whose parameters fix their size",
    )
    """Sizes: a list for every family, or a mapping family -> list (required, except for a
    family whose parameters fix its size, a model file's). Typed ``Any``: OmegaConf cannot
    merge a mapping into a list node."""
    methods: Any = choices(None, _methods)
    """Approximations: a mapping method -> list of its settings, such as ``{topp: [0.5, 0.9],
    topk: [5, 20]}`` (``pipeline.methods.METHODS``); typed ``Any``: a mapping of lists."""
    horizon: int = ranged(50, least=1)
    """Steps after the prior: beliefs and errors are stored for t = 0..horizon."""
    seeds: list[int] = ranged(lambda: [0], least=0)
    """Random seeds: of a seeded family's model and of the sampled observations."""
    modes: list[str] = choices(lambda: list(modes.DEFAULT), modes.names)
    """Inference modes (``pipeline.kinds.methods.modes``, each a value of the ``mode`` dim):
    ``predict`` (no observations), ``filter`` (observed paths), ``smooth`` (every step's
    posterior given the whole path), ``decode`` (the Viterbi path), every other registered
    mode and installed plug-ins; a mode that takes a setting is named with it
    (``fixed_lag_2``: fixed-lag smoothing at lag 2)."""
    observe_every: int = ranged(5, least=1)
    """Filtering observes a symbol at every step t with t % observe_every == 0."""


@dataclass
class TimingConfig:
    repeats: int = ranged(3, least=1)
    """Least number of timing rounds per model, mode and seed: each round runs the exact
    reference once and every approximation of its cells once, in alternating order; min,
    median and max over rounds are stored."""
    min_seconds: float = ranged(0.2, least=0)
    """Rounds are repeated until they took this long in all (at most ``max_repeats``): short
    runs of small models need many repeats before a median means anything."""
    max_repeats: int = ranged(1000, least="repeats")
    """The most rounds per model, mode and seed, however short the runs."""
    blas_threads: int = ranged(1, least=1)
    """BLAS threads in every timed run (fixed with threadpoolctl and recorded)."""
    enabled: bool = True
    """Time the runs; false: accuracy only (each cell runs its approximation once and stores
    no runtimes: NaN, its ``missing`` attribute says why), for many cells."""


def _parameter_doc(family: str, name: str) -> dict[str, str]:
    """The field metadata of ``family``'s parameter ``name`` from its ``build`` docstring
    (``reference.parameter_docs``); an entry "As in the ``kernel`` family" reads that
    family's."""
    metadata = parameter_docs(FAMILIES[family].build)[name]
    other = re.fullmatch(r"As in the ``(\w+)`` family\.?", metadata["doc"])
    return _parameter_doc(other[1], name) if other else metadata


def _parameters_dataclass(family: str) -> type:
    """A dataclass of ``family``'s keyword parameters, from its ``build`` signature, each
    field's meaning from its docstring."""
    hints = typing.get_type_hints(FAMILIES[family].build)
    fields = [
        (
            name,
            optional(hints.get(name, Any)),
            field(default=default, metadata=_parameter_doc(family, name)),
        )
        for name, default in family_parameters(family).items()
    ]
    return make_dataclass(f"{family.capitalize()}Parameters", fields)


@functools.cache
def model_config() -> type:
    """``methods.model.<family>.<param>``: the keyword parameters of every model family, made
    once when the schema is first needed. A built-in's are typed, with their defaults; a plug-in
    family's section holds what the config sets (``{}``): the plug-in is imported only when
    a sweep uses it, and its ``build`` signature checks the keys then."""
    fields = []
    for family in FAMILIES.names():
        if family in BUILTIN_FAMILIES:
            cls = _parameters_dataclass(family)
            fields.append((family, cls, field(default_factory=cls)))
        else:
            doc = f"The keyword parameters of the plug-in family {family!r} (unset: its defaults)."
            fields.append(
                (family, dict[str, Any], field(default_factory=dict, metadata={"doc": doc}))
            )
    return make_dataclass("ModelConfig", fields)


@dataclass
class MethodsConfig:
    """The keys the methods kind reads, its section ``methods``."""

    grid: GridConfig = field(default_factory=GridConfig)
    model: Any = field(default_factory=lambda: model_config()())
    """``methods.model.<family>.<param>``: every family's keyword parameters
    (``model_config``)."""
    timing: TimingConfig = field(default_factory=TimingConfig)
    fuse_states: int = ranged(500, least=0)
    """Models with at most this many states compute all their cells in one Dask task."""
    exact_max_states: Optional[int] = ranged(None, least=2)  # noqa: UP045
    """Models with more states get no exact reference (default: all do): their cells time
    the approximation alone and the online certificate bounds its prediction error."""
    gamma_exact_max_states: int = ranged(20000, least=2)
    """gamma is exact up to this many states (a pair search in Dask tasks of about 2000
    rows); above, the Doeblin lower bound stands in for it (``gamma_exact`` says which)."""
