"""Every registered mode of the methods sweep keeps the contract of ``pipeline.testing.modes``
(it declares what the frame asks of it, and it runs through a tiny sweep, its store read
back with xarray and its report section rendered); a bad mode is a one-line error, and a
plug-in's mode joins by its entry point."""

import pytest

from pipeline.kinds.methods import modes
from pipeline.kinds.methods.modes.base import Mode
from pipeline.plugins import Registry
from pipeline.sweep.config import ConfigError, validate
from pipeline.testing import check_mode
from pipeline.testing.modes import check_declares

from sweeping import composed, install


def _named(name: str) -> str:
    """A mode name a grid may give: a mode that takes a setting at setting 1."""
    return f"{name}_1" if modes.MODES[name].setting else name


NAMES = [_named(name) for name in modes.MODES]
"""Every registered mode, as a grid names it."""


def test_every_registered_mode_keeps_the_contract(client):
    """Every mode declares what the frame asks of it and runs through one tiny sweep, its
    report section rendered (``pipeline.testing.check_mode``)."""
    check_mode(*NAMES, client=client)


def test_the_contract_names_a_mode_nothing_registers():
    with pytest.raises(AssertionError, match="unknown mode 'sample'; allowed: predict"):
        check_declares("sample")


def test_an_unknown_mode_or_a_missing_setting_is_a_one_line_error():
    with pytest.raises(ConfigError, match="unknown mode 'sample'; allowed: predict") as error:
        validate(composed("methods.grid.modes=[sample]"))
    assert "\n" not in str(error.value)
    for name, mode in modes.MODES.items():
        if mode.setting:
            with pytest.raises(ConfigError, match=f"takes a setting .* {name}_<setting>"):
                validate(composed(f"methods.grid.modes=[{name}]"))


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
    allowed in ``methods.grid.modes`` and looked up like them."""
    monkeypatch.syspath_prepend(str(tmp_path))
    install(tmp_path, "modepkg", {"everywhere_mode": PLUGIN}, {"pipeline.modes": ENTRY})
    registry = Registry[Mode]("mode", "pipeline.modes", modes.BUILTIN)
    monkeypatch.setattr(modes, "MODES", registry)
    assert list(registry)[: len(modes.BUILTIN)] == list(modes.BUILTIN)
    assert "everywhere" in modes.names() and registry.origin("everywhere") == "modepkg 0.1"
    validate(composed("methods.grid.modes=[filter,everywhere]"))
    assert modes.lookup("everywhere").title == "filtering, every step observed"
