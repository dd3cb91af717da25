"""Hypothesis profiles: 'ci' (default) is derandomized so CI runs are repeatable."""

import os

from hypothesis import settings

settings.register_profile("ci", deadline=None, max_examples=60, derandomize=True)
settings.register_profile("dev", deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
