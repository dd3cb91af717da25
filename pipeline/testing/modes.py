"""The contract every mode of the methods sweep keeps, by the name a grid gives it (a built-in
or a plug-in of the entry-point group ``pipeline.modes``; a mode that takes a setting at
one, ``fixed_lag_1``):

- it declares what the frame asks of it: a title, the measures it produces, its runs and
  memory, and, for a built-in, the ``missing`` text of every measure it leaves NaN names it
  (``check_declares``);
- it runs through a tiny sweep of ``bell`` models under top-p, which every mode runs, and
  belief pruning, which some do not (``Mode.supports``): every cell is done, what the mode
  produces is measured and the rest NaN, read back with xarray; its report section is in
  the report and its figures draw something (``check_sweep``: imports the sweep, Hydra and
  Dask, when called).

``check_mode`` runs them all; each raises ``AssertionError`` naming the mode at fault.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.kinds.methods import modes
from pipeline.kinds.methods.modes.base import MEASURES, Mode
from pipeline.kinds.methods.results import VARIABLES


def _mode(name: str) -> Mode:
    """The mode a grid names ``name``; ``AssertionError`` naming those registered."""
    try:
        return modes.lookup(name)
    except ValueError as error:  # unknown, or a plug-in that cannot be used
        raise AssertionError(str(error)) from None


def _says_why(mode: Mode, variable: str) -> bool:
    """Whether the ``missing`` text of ``variable`` names ``mode`` among those that leave it
    NaN ("NaN in <modes> mode...") or not among those that fill it ("NaN outside <modes>
    mode...")."""
    for clause in VARIABLES[variable].missing.split("; "):
        words = re.findall(r"\w+", clause.split(" mode")[0])
        if words[:2] == ["NaN", "in"] and mode.registered in words:
            return True
        if words[:2] == ["NaN", "outside"] and mode.registered not in words:
            return True
    return False


def check_declares(name: str) -> None:
    """The mode of ``name`` is a ``Mode`` named so, registered, with a title and a line name;
    it produces measures of ``MEASURES``, holds at least one run, and needs memory for its
    run and its likelihoods (51 steps, 100 states). A built-in's every other measure says in
    its ``missing`` text that this mode leaves it NaN."""
    mode = _mode(name)
    assert isinstance(mode, Mode), f"{name}: a {type(mode).__name__}, not a Mode"
    assert mode.name == name and mode.title, f"{name}: named {mode.name!r}, title {mode.title!r}"
    assert mode.registered in modes.MODES and mode.line_name, f"{name}: not registered as such"
    assert mode.produces and mode.produces <= set(MEASURES), f"{name}: produces {mode.produces}"
    assert mode.held_runs >= 1, f"{name}: holds {mode.held_runs} runs"
    assert mode.run_bytes(51, 100) > 0 and mode.likelihood_bytes(51, 100) > 0, name
    if mode.registered in modes.BUILTIN:
        for variable in sorted(set(MEASURES) - mode.produces):
            assert _says_why(mode, variable), f"{name}: {variable}'s missing text omits it"


def check_sweep(*names: str, client: Any = None) -> None:
    """The modes of ``names`` in one tiny sweep (``bell`` at 12 states, seed 0, horizon 6,
    ``topp`` and ``topp_states`` at 0.9, untimed) on ``client`` (a ``distributed.Client``;
    None: the sweep starts its configured cluster), its store read back with xarray: every
    cell done, each mode's measures measured where it runs and NaN elsewhere, its report
    section in the Markdown report and its figures drawn."""
    import xarray as xr

    from pipeline.kinds.methods.report import KIT, report
    from pipeline.methods import approximate
    from pipeline.models import build_model
    from pipeline.sweep import run

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "results.zarr"
        run(
            [
                "experiment=smoke",
                "methods.grid.families=[bell]",
                "methods.grid.n_states=[12]",
                "methods.grid.methods={topp:[0.9],topp_states:[0.9]}",
                "methods.grid.seeds=[0]",
                "methods.grid.horizon=6",
                f"methods.grid.modes=[{','.join(names)}]",
                "methods.timing.enabled=false",
                f"store={path}",
            ],
            client=client,
        )
        with xr.open_zarr(path) as opened:
            ds = opened.load()
    assert [str(m) for m in ds["mode"].values] == list(names), list(ds["mode"].values)
    assert bool(ds["done"].all()), "cells not done"
    cell = ds.sel(family="bell", n_states=12, seed=0)
    pruning = approximate(build_model("bell", 12), "topp_states", 0.9)
    for name in names:
        mode = _mode(name)
        top = cell.sel({"method": "topp", "setting": 0.9, "mode": name})
        for variable in MEASURES:
            measured = bool(top[variable].notnull().any())
            assert measured == (variable in mode.produces), f"{name}: {variable} {measured=}"
        pruned = cell.sel({"method": "topp_states", "setting": 0.9, "mode": name})
        read = {variable for variable in mode.produces if pruned[variable].notnull().any()}
        runs = mode.supports(pruning)
        # the exact side's evidence is measured whether the approximation runs or not
        assert bool(read - {"log_evidence"}) == runs, f"{name}: pruning {runs=}, read {read}"
    text = report(ds, path, [])  # the Markdown alone: the other figures are report's own
    for name in names:
        mode = _mode(name)
        missing = [line for line in mode.section(ds, KIT) if line not in text]
        assert not missing, f"{name}: its section is not in the report: {missing[:1]}"
        for title, figure in mode.figures(ds, KIT).items():
            assert any(axis.has_data() for axis in figure.axes), f"{name}: {title} is empty"


CHECKS: tuple[Callable[..., None], ...] = (check_declares, check_sweep)
"""Every check of a mode, each a function of its name (``check_sweep`` takes several, and
the client)."""


def check_mode(*names: str, client: Any = None) -> None:
    """Run every check of ``CHECKS`` on each mode of ``names`` (as a grid names them:
    ``filter``, ``fixed_lag_1``); ``check_sweep`` runs them all in one sweep on ``client``
    (None: the sweep starts its configured cluster)."""
    assert names, "no mode named"
    for name in names:
        check_declares(name)
    check_sweep(*names, client=client)
