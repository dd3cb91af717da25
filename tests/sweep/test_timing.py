"""The one timing policy of every sweep kind: each run warmed up, then timed in rounds."""

import itertools
import time

import numba
import numpy as np
import pytest
import xarray as xr

from pipeline.kinds.methods import records, tasks
from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.results import SCHEMA
from pipeline.kinds.methods.timed import timed_runs
from pipeline.sweep import timing
from pipeline.sweep.timing import Timing, blas_threads, clocked, once

from sweeping import assert_warmup_attributes, composed


def test_rounds_call_every_run_once_a_round_in_alternating_order():
    calls = []

    def run(name):
        calls.append(name)
        return len(calls)

    found = Timing(repeats=3, max_repeats=10).rounds({n: lambda n=n: run(n) for n in "abc"})
    assert "".join(calls) == "abc" + "abccbaabc"  # each warmed up once, untimed, first
    assert found == {"a": [4, 9, 10], "b": [5, 8, 11], "c": [6, 7, 12]}


def test_a_long_warm_up_call_is_its_runs_first_timed_call(monkeypatch):
    """Runs whose warm-up took ``LONG_CALL`` seconds are not called again in the first
    round; the others are."""
    monkeypatch.setattr(timing, "LONG_CALL", 0.05)
    calls = []

    def run(name):
        calls.append(name)
        if name == "slow":
            time.sleep(0.06)
        return len(calls)

    found = Timing(repeats=2, max_repeats=2).rounds({n: lambda n=n: run(n) for n in ("slow", "a")})
    assert calls == ["slow", "a", "a", "a", "slow"]  # warm-ups, round 1 (a), round 2 reversed
    assert found == {"slow": [1, 5], "a": [3, 4]}


def test_once_times_the_call_after_its_warm_up():
    calls = []
    result, seconds = once(lambda: calls.append(time.perf_counter()) or len(calls))
    assert result == 2 and len(calls) == 2 and 0 <= seconds < 60


def test_rounds_go_on_for_min_seconds_and_stop_at_max_repeats():
    assert len(Timing(1, min_seconds=3600, max_repeats=4).rounds({"a": lambda: 0})["a"]) == 4
    found = Timing(2, min_seconds=0.05, max_repeats=1000).rounds({"a": lambda: time.sleep(0.01)})
    assert len(found["a"]) >= 5  # each round sleeps at least 0.01 s


def test_nothing_is_run_with_timing_off():
    def fail():
        raise AssertionError("ran")

    assert Timing(3, enabled=False).rounds({"a": fail}) == {"a": []}


def test_threads_are_fixed_while_timing_and_restored_after():
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    before = numba.get_num_threads()
    seen = Timing(1, threads=1).rounds({"a": lambda: (blas_threads(), numba.get_num_threads())})
    assert seen == {"a": [(1, 1)]}
    assert numba.get_num_threads() == before


def test_clocked_returns_the_result_and_its_seconds():
    result, seconds = clocked(lambda: time.sleep(0.02) or "done")()
    assert result == "done" and seconds == pytest.approx(0.02, abs=0.5) and seconds >= 0.02


def test_the_smoke_grids_speedups_agree_with_warm_runs_and_say_they_were_warmed(smoke):
    """Every stored speedup of smooth and decode (one timed round in a worker, after the
    warm-up) is within 3x of the same pair timed warm here (the median of 15 rounds): a
    first call's compilation is no longer stored as a method's runtime (it gave 0.00x)."""
    ds = xr.open_zarr(smoke[0]).load()
    assert_warmup_attributes(ds, SCHEMA)
    grid = MethodsGrid.from_config(composed())
    warm = Timing(repeats=15, max_repeats=15, threads=grid.timing.threads)
    which = tuple((m, s) for m in grid.methods for s in grid.settings[m])
    far = []
    for family, seed, mode in itertools.product(grid.families, grid.seeds, ("smooth", "decode")):
        for n in grid.sizes[family]:
            model = tasks.build(records.ModelSpec(family, n, seed, grid.params[family]))
            built = [tasks.build_approximation(model, method=m, setting=s) for m, s in which]
            exact = tasks.reference(
                model, mode=mode, horizon=grid.horizon, observe_every=grid.observe_every,
                seed=seed, run=True,
            )  # fmt: skip
            timed = timed_runs(model, exact, *built, which=which, mode=mode, timing=warm)
            for (method, setting), approx in timed.approx.items():
                here = float(np.median(timed.exact[:, -1] / approx[:, -1]))
                where = dict(family=family, n_states=n, method=method, setting=setting)
                stored = float(ds.speedup.sel(where | {"seed": seed, "mode": mode}))
                if not 1 / 3 <= stored / here <= 3:
                    far.append(
                        f"{where} seed {seed} {mode}: stored {stored:.3g}x, warm {here:.3g}x"
                    )
    assert not far, "\n".join(far)
