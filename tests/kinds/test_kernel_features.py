"""The kernel-features sweep (Chiu, Deng and Rush, Section 6): config errors, a cell, one
real run and its report."""

import numpy as np
import pytest
import xarray as xr
from matplotlib.image import imread

from pipeline.analysis import analyze
from pipeline.kinds.kernel_features import sweep as kernel_features
from pipeline.kinds.kernel_features.grid import FeaturesCell
from pipeline.kinds.kernel_features.tasks import features_cell
from pipeline.sweep import run
from pipeline.sweep.config import ConfigError, validate

from sweeping import assert_warmup_attributes, composed

TINY = [
    "experiment=kernel_features",
    "kernel_features.n_states=[16,64]",
    "kernel_features.n_features=[2,8,32,512]",
    "kernel_features.temperatures=[1,8]",
    "kernel_features.rows=32",
]


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "kernel_features.n_features=[3]",
            "kernel_features.n_features: 3 is not allowed; allowed: even",
        ),
        ("kernel_features.temperatures=[0]", "kernel_features.temperatures: 0.0 is not allowed"),
        (
            "kernel_features.feature_maps=[cosine]",
            "kernel_features.feature_maps: 'cosine' is not allowed; allowed: positive, fourier",
        ),
        ("kernel_features.n_states=[1]", "kernel_features.n_states: 1 is not allowed"),
        ("kernel_features.threshold=1", "kernel_features.threshold: 1.0 is not allowed"),
        (
            "kernel_features.rows=0",
            "kernel_features.rows: 0 is not allowed; allowed: integers >= 1",
        ),
    ],
)
def test_bad_settings_are_one_line_errors(override, expected):
    with pytest.raises(ConfigError) as error:
        validate(composed("experiment=kernel_features", override))
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_a_cell_measures_every_feature_count():
    grid = kernel_features.grid(composed(*TINY))
    values = features_cell(FeaturesCell(16, 8.0, "positive"), grid.n_features, grid.settings)
    tv = values.row_tv
    assert tv.shape == (4,) and tv[-1] < tv[0] and values.rows == 16  # all 16 rows
    again = features_cell(FeaturesCell(16, 8.0, "positive"), grid.n_features, grid.settings)
    np.testing.assert_array_equal(again.row_tv, tv)  # seeded by the cell


def test_the_sweep_runs_and_reports(client, tmp_path):
    path = tmp_path / "results.zarr"
    run([*TINY, f"store={path}"], client=client)
    ds = xr.open_zarr(path).load()
    assert "F for a median row TV <= 0.05, by n_states" in kernel_features.summary(ds)
    assert ds.attrs["kind"] == "kernel_features" and ds["done"].all()
    assert dict(ds.sizes) == {"n_states": 2, "temperature": 2, "feature_map": 2, "n_features": 4}
    assert ds["row_tv"].attrs["units"] == "1" and "median" in ds["row_tv"].attrs["long_name"]
    assert_warmup_attributes(ds, kernel_features.SCHEMA)
    np.testing.assert_array_equal(ds["rows"].sel(n_states=16), 16)  # rows reveal n_states
    np.testing.assert_array_equal(ds["rows"].sel(n_states=64), 32)
    assert (ds["negative_entries"].sel(feature_map="positive") == 0).all()
    soft = ds["row_tv"].sel(temperature=8.0, feature_map="positive")
    assert (soft.isel(n_features=-1) < soft.isel(n_features=0)).all()
    written = analyze(path, tmp_path / "report")
    text = written.report.read_text()
    for name in ("features_needed.png", "row_tv.png"):
        assert f"![{name}]({name})" in text
        assert np.ptp(imread(tmp_path / "report" / name)[..., :3]) > 0.5
    assert "F for a median row TV <= 0.05, at the smallest and the largest n:" in text
