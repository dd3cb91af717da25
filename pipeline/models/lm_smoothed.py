"""The bigram LM under a second label, so one sweep can hold two readings of it.

The family ``lm`` (``pipeline.models.lm``) itself, with the same parameters and
defaults (add-k smoothing, k = 0.01): ``experiment=paper`` sets
``model.lm.alpha=0`` (maximum likelihood) and keeps this label for the
smoothed model beside it.
"""

from pipeline.models.lm import SEEDED, build, check

__all__ = ["SEEDED", "build", "check"]
