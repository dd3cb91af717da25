"""The sweep's printed summary shows ``-`` for every value never measured, never ``nan``."""

import numpy as np
from omegaconf import OmegaConf

from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import SCHEMA, summary
from pipeline.sweep.layout import template

from sweeping import composed


def test_a_grid_without_prediction_shows_its_tv_as_a_dash():
    cfg = composed("grid.modes=[smooth,decode]", "grid.families=[bell]", "grid.n_states=[20]")
    ds, _ = template(SCHEMA, MethodsGrid.from_config(cfg), {"config": OmegaConf.to_yaml(cfg)})
    ds["done"][:] = ds["in_grid"].broadcast_like(ds["done"]).transpose(*ds["done"].dims)
    for name, value in {
        "runtime_exact": 2.0,
        "runtime_exact_min": 1.6,
        "runtime_approx": 1.0,
        "runtime_approx_min": 0.8,
        "repeats": 3,
        "speedup": 2.0,
    }.items():
        ds[name][:] = value
    ds["sparsity"][:] = 0.5
    ds["bound"][:] = np.nan  # a bound is for prediction: none in this grid
    lines = summary(ds).splitlines()
    header, rows = lines[0].split("  "), [line.split() for line in lines[1:-1]]
    assert "tv predict" in lines[0] and "speedup smooth" in lines[0] and rows
    tv = [h.strip() for h in header if h.strip()].index("tv predict")
    assert all(row[tv : tv + 3] == ["-", "-", "0.5000"] for row in rows), rows  # tv, bound
    assert all(row[4:6] == ["2.00x", "2.00x"] for row in rows), rows
    assert "nan" not in "\n".join(lines)
