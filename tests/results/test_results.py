"""The results layer on its own: reading a store needs neither Hydra nor the sweep."""

import subprocess
import sys

from pipeline.results.registry import BUILTIN, KINDS


def test_reading_results_imports_neither_hydra_nor_the_sweep():
    """Nor does any built-in kind's report, imported as ``analyze`` imports it."""
    code = (
        "import sys, pipeline.analysis, pipeline.results, pipeline.analyze\n"
        "from pipeline.results.registry import BUILTIN, KINDS\n"
        "reports = [KINDS[name].load('report') for name in BUILTIN]\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('hydra', 'dask')"
        " or m.startswith('pipeline.sweep') or m == 'distributed')\n"
        "print(loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_kinds_clock_readings_are_marked_timed():
    """A variable in seconds or per second is a clock reading of the sweep's timing policy:
    its kind's schema marks it ``timed``, so its store says how it was warmed up; so is the
    methods kind's speedup, a ratio of two."""
    timed = {
        (kind, name)
        for kind in BUILTIN
        for name, variable in KINDS[kind].schema.variables.items()
        if variable.timed
    }
    clocks = {
        (kind, name)
        for kind in BUILTIN
        for name, variable in KINDS[kind].schema.variables.items()
        if variable.units in ("s", "1/s")
    }
    assert timed == clocks | {("methods", "speedup")}
    assert {kind for kind, _ in timed} == {
        "methods",
        "coupled",
        "training",
        "kernel_features",
        "learning",
    }
