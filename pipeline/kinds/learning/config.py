"""The learning kind's settings: the ``learning`` section, every field's meaning in its
docstring (``--help``, the reference), the numbers' ranges declared on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.sweep.config.validation import choices, ranged

METHODS = ("topp_transitions", "topk_transitions", "lowrank", "banded_lowrank")
"""The E-steps the kind sweeps. The paper's ``topp`` and ``topk`` truncate the emissions
too (Definition 4), so an observed symbol can have probability zero in every state the
E-step holds and EM cannot score its training sequence (``pipeline.learning``); their
``_transitions`` variants truncate the transitions alone and stand in for them. Belief
pruning (``topp_states``) is not a smoothing method."""


@dataclass
class LearningConfig:
    """EM with an approximate E-step against exact EM (``pipeline.kinds.learning``): each
    (family, n_states, seed, sequences, length) is a problem whose exact EM runs once, and
    each (method, setting) a cell that fits from the same start."""

    families: Any = choices(
        None,
        "a mapping of model families to lists of state counts (integers >= 2)",
    )
    """Generating models: family -> its state counts n (``pipeline.models``); must be set."""
    seeds: list[int] = ranged(lambda: [0], least=0)
    """Seeds of the generating model, its data and the start model, one problem each."""
    sequences: list[int] = ranged(lambda: [20], least=1)
    """Training sequences, one problem each."""
    length: list[int] = ranged(lambda: [50], least=2)
    """Steps of every training and held-out sequence, one problem each."""
    held_out: int = ranged(20, least=1)
    """Held-out sequences of every problem, drawn independently of the training ones."""
    methods: Any = choices(
        None,
        f"a mapping of methods ({', '.join(METHODS)}) to lists of their settings",
    )
    """E-step approximations: method -> its settings (p for top-p, k for top-k, the rank for
    the low-rank ones), one cell each; must be set."""
    iterations: int = ranged(10, least=1)
    """The most EM iterations of every run."""
    tolerance: float = ranged(0.0, least=0)
    """The training log-likelihood gain below which a run stops (0: every iteration)."""
    pseudocount: float = ranged(0.01, least=0)
    """Added to the emission counts at every M-step, so that a held-out symbol keeps a
    probability."""
    noise: float = ranged(0.5, least=0, most=1, above=True)
    """The weight of random rows in the start model (``pipeline.learning.problem``)."""


__all__ = ["METHODS", "LearningConfig"]
