"""The results layer on its own: reading a store needs neither Hydra nor the sweep."""

import subprocess
import sys


def test_reading_results_imports_neither_hydra_nor_the_sweep():
    code = (
        "import sys, pipeline.analysis, pipeline.results, pipeline.analyze\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'hydra'"
        " or m.startswith('pipeline.sweep') or m == 'distributed')\n"
        "print(loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
