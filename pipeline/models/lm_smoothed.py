"""The bigram LM with add-k smoothing, under a label of its own.

The same model as ``lm`` (``pipeline.models.lm``) with the smoothing it uses by
default, k = 0.01: a second label lets one sweep hold both readings of the top-p
paper's LM side by side, e.g. ``lm`` with ``model.lm.alpha=0`` (maximum
likelihood) beside ``lm_smoothed`` (``experiment=paper``).
"""

from __future__ import annotations

from pipeline.models import lm
from pipeline.models.hmm import HMM

SEEDED = lm.SEEDED


def check(
    n_states: int, *, corpus: str | None = None, alpha: float = 0.01, structured: bool = False
) -> None:
    """As ``lm.check``."""
    lm.check(n_states, corpus=corpus, alpha=alpha, structured=structured)


def build(
    n_states: int,
    seed: int = 0,
    *,
    corpus: str | None = None,
    alpha: float = 0.01,
    structured: bool = False,
) -> HMM:
    """As ``lm.build``."""
    return lm.build(n_states, seed, corpus=corpus, alpha=alpha, structured=structured)
