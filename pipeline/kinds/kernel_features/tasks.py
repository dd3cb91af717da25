"""What the Dask workers of a kernel-features sweep run: one cell, its embeddings, exact
softmax rows and kernel rows of every feature count (``pipeline.hmmlm.feature_maps``)."""

from __future__ import annotations

import numpy as np

from pipeline.hmmlm import feature_maps
from pipeline.kinds.kernel_features.grid import FeaturesCell, Settings
from pipeline.kinds.kernel_features.results import FeaturesRecord
from pipeline.sweep.timing import once


def _rng(settings: Settings, cell: FeaturesCell, stream: int) -> np.random.Generator:
    """A generator of the cell's state count and temperature (``stream`` 0: the embeddings,
    shared by both maps; 1 + the map's index: its features)."""
    key = [settings.seed, cell.n_states, round(cell.temperature * 1_000_000), stream]
    return np.random.default_rng(key)


def features_cell(
    cell: FeaturesCell, n_features: tuple[int, ...], settings: Settings
) -> FeaturesRecord:
    """Measure one cell: the rows' TV for every feature count, and the seconds of the
    whole cell after its warm-up (``pipeline.sweep.timing.once``)."""

    def measure() -> tuple[feature_maps.RowErrors, int]:
        e = feature_maps.embeddings(
            cell.n_states, settings.dim, cell.temperature, settings.rows,
            _rng(settings, cell, 0), dtype=np.float32,
        )  # fmt: skip
        exact = feature_maps.softmax_rows(e)
        stream = 1 + feature_maps.FEATURE_MAPS.index(cell.feature_map)
        rng = _rng(settings, cell, stream)
        kernel = feature_maps.kernel_rows(e, cell.feature_map, n_features, rng)
        return feature_maps.row_errors(exact, kernel), len(e.U)

    (errors, rows), seconds = once(measure)
    return FeaturesRecord(
        row_tv=errors.median,
        row_tv_p90=errors.p90,
        negative_entries=errors.negative,
        rows=rows,
        seconds=seconds,
    )
