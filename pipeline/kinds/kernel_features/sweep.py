"""The kernel-features sweep: how many random features F a softmax over n states needs
(Section 6 of Chiu, Deng and Rush, *Scaling Hidden Markov Language Models*), for the
positive feature map of the kernel HMMs beside random Fourier features.

A config with a ``kernel_features`` section (``experiment=kernel_features``) computes one
cell per ``(n_states, temperature, feature_map)`` (``grid``) as a Dask task
(``tasks.features_cell``):
Gaussian embeddings of ``n_states`` states at the temperature, the exact softmax rows of
``rows`` sampled states, and the kernel rows of every feature count (the first F of one
map of the largest count; ``pipeline.hmmlm.feature_maps``). The store keeps what
``results`` lists. This module is the kind's ``pipeline.sweep.kind.SweepKind``: it checks
the section and submits the cells.
"""

from __future__ import annotations

from pathlib import Path

from distributed import Client, Future

from pipeline.hmmlm import feature_maps
from pipeline.kinds.kernel_features import results
from pipeline.kinds.kernel_features.config import KernelFeaturesConfig
from pipeline.kinds.kernel_features.grid import FeaturesCell, FeaturesGrid, grid
from pipeline.kinds.kernel_features.tasks import features_cell
from pipeline.sweep.config import check_list
from pipeline.sweep.config.errors import ConfigError
from pipeline.sweep.kind import submit_each

SCHEMA = results.SCHEMA
SECTION = "kernel_features"
CONFIG = KernelFeaturesConfig
summary = results.summary

__all__ = ["CONFIG", "SCHEMA", "SECTION", "grid", "submit", "summary", "validate"]


def validate(cfg) -> None:
    """Raise ``ConfigError`` naming the first invalid key of ``kernel_features``."""
    section = cfg.kernel_features
    check_list("kernel_features.n_states", section.n_states, int, "integers >= 2")
    check_list("kernel_features.n_features", section.n_features, int, "even integers >= 2")
    check_list("kernel_features.temperatures", section.temperatures, (int, float), "numbers > 0")
    allowed = ", ".join(feature_maps.FEATURE_MAPS)
    check_list("kernel_features.feature_maps", section.feature_maps, str, allowed)
    for key, values, ok, allowed_values in (
        ("n_features", section.n_features, lambda f: f % 2 == 0, "even integers >= 2"),
        ("feature_maps", section.feature_maps, lambda m: m in feature_maps.FEATURE_MAPS, allowed),
    ):
        for value in values:
            if not ok(value):
                raise ConfigError(
                    f"kernel_features.{key}", f"{value!r} is not allowed; allowed: {allowed_values}"
                )


def submit(
    client: Client, grid: FeaturesGrid, cells: list[FeaturesCell], *, store: Path
) -> dict[Future, list[FeaturesCell]]:
    """One task per cell; the future of each and the cells it computes."""
    return submit_each(
        client,
        features_cell,
        cells,
        grid.n_features,
        grid.settings,
        prefix="features",
    )
