"""The contract every registered mode of the methods sweep keeps: it declares what the frame
asks of it, and it runs through a tiny sweep, its store read back with xarray and its report
section rendered."""

import re

import pytest
import xarray as xr

from pipeline.kinds.methods import modes
from pipeline.kinds.methods.modes.base import MEASURES, Mode
from pipeline.kinds.methods.report import KIT, report
from pipeline.kinds.methods.results import VARIABLES
from pipeline.methods import approximate
from pipeline.models import build_model
from pipeline.plugins import Registry
from pipeline.sweep import run
from pipeline.sweep.config import ConfigError, validate

from sweeping import composed, install


def _named(name: str) -> str:
    """A mode name a grid may give: a mode that takes a setting at setting 1."""
    return f"{name}_1" if modes.MODES[name].setting else name


NAMES = [_named(name) for name in modes.MODES]
"""Every registered mode, as a grid names it."""


@pytest.mark.parametrize("name", NAMES)
def test_a_mode_declares_what_the_frame_asks(name):
    mode = modes.lookup(name)
    assert isinstance(mode, Mode) and mode.name == name and mode.title
    assert mode.registered in modes.MODES and mode.line_name
    assert mode.produces and mode.produces <= set(MEASURES)
    assert mode.held_runs >= 1 and mode.run_bytes(51, 100) > 0
    assert mode.likelihood_bytes(51, 100) > 0
    if mode.registered not in modes.BUILTIN:
        return
    for variable in set(MEASURES) - mode.produces:  # NaN in its cells, and the store says why
        missing = VARIABLES[variable].missing
        listed = [re.findall(r"\w+", clause.split(" mode")[0]) for clause in missing.split("; ")]
        said = [
            (words[:2] == ["NaN", "in"] and mode.registered in words)
            or (words[:2] == ["NaN", "outside"] and mode.registered not in words)
            for words in listed
        ]
        assert any(said), (name, variable, missing)


def test_an_unknown_mode_or_a_missing_setting_is_a_one_line_error():
    with pytest.raises(ConfigError, match="unknown mode 'sample'; allowed: predict") as error:
        validate(composed("grid.modes=[sample]"))
    assert "\n" not in str(error.value)
    for name, mode in modes.MODES.items():
        if mode.setting:
            with pytest.raises(ConfigError, match=f"takes a setting .* {name}_<setting>"):
                validate(composed(f"grid.modes=[{name}]"))


def test_every_mode_runs_through_a_tiny_sweep_and_its_report_renders(client, tmp_path):
    """One sweep of every registered mode: top-p, which every mode runs, and belief pruning,
    which some do not (``Mode.supports``). Each cell is done; what its mode produces is
    measured in it, the rest NaN; each mode's section is in the report and its figures draw
    something."""
    path = tmp_path / "results.zarr"
    run(
        [
            "experiment=smoke",
            "grid.families=[bell]",
            "grid.n_states=[12]",
            "grid.methods={topp:[0.9],topp_states:[0.9]}",
            "grid.seeds=[0]",
            "grid.horizon=6",
            f"grid.modes=[{','.join(NAMES)}]",
            "timing.enabled=false",
            f"store={path}",
        ],
        client=client,
    )
    ds = xr.open_zarr(path).load()
    assert [str(m) for m in ds["mode"].values] == NAMES and bool(ds["done"].all())
    cell = ds.sel(family="bell", n_states=12, seed=0)
    for name in NAMES:
        mode = modes.lookup(name)
        top = cell.sel({"method": "topp", "setting": 0.9, "mode": name})
        for variable in MEASURES:
            measured = bool(top[variable].notnull().any())
            assert measured == (variable in mode.produces), (name, variable)
        pruned = cell.sel({"method": "topp_states", "setting": 0.9, "mode": name})
        runs = mode.supports(approximate(build_model("bell", 12), "topp_states", 0.9))
        read = {variable for variable in mode.produces if pruned[variable].notnull().any()}
        assert bool(read - {"log_evidence"}) == runs, (name, read)  # the exact side's evidence
    text = report(ds, path, [])  # the Markdown alone: the other figures are report's own
    for name in NAMES:
        mode = modes.lookup(name)
        assert all(line in text for line in mode.section(ds, KIT)), name
        for figure in mode.figures(ds, KIT).values():
            assert any(axis.has_data() for axis in figure.axes), name


PLUGIN = """
from pipeline.kinds.methods.modes.filter import Filter


class Everywhere(Filter):
    name = registered = "everywhere"
    title = "filtering, every step observed"


MODE = Everywhere()
"""
ENTRY = {"everywhere": "everywhere_mode:MODE"}


def test_a_plugin_mode_joins_by_its_entry_point(tmp_path, monkeypatch):
    """A package's mode (entry point group ``pipeline.modes``) is listed after the built-ins,
    allowed in ``grid.modes`` and looked up like them."""
    monkeypatch.syspath_prepend(str(tmp_path))
    install(tmp_path, "modepkg", {"everywhere_mode": PLUGIN}, {"pipeline.modes": ENTRY})
    registry = Registry[Mode]("mode", "pipeline.modes", modes.BUILTIN)
    monkeypatch.setattr(modes, "MODES", registry)
    assert list(registry)[: len(modes.BUILTIN)] == list(modes.BUILTIN)
    assert "everywhere" in modes.names() and registry.origin("everywhere") == "modepkg 0.1"
    validate(composed("grid.modes=[filter,everywhere]"))
    assert modes.lookup("everywhere").title == "filtering, every step observed"
