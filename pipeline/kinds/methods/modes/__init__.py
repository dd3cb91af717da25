"""The modes of the methods sweep, one module each, behind one interface (``base.Mode``).

- ``predict``: ``P(S_t)``, nothing observed (``forward``);
- ``filter``: ``P(S_t | o_0..o_t)`` on a sampled path (``forward``);
- ``smooth``: ``P(S_t | o_0..o_{T-1})``, forward-backward;
- ``decode``: the most probable path (Viterbi).

A built-in mode is one module here whose ``MODE`` is registered in ``BUILTIN``, plus its
test; ``tests/kinds/methods/test_modes.py`` holds every registered mode to the interface
and runs it through a tiny sweep. Installed packages add modes through the entry-point group
``pipeline.modes`` (``pipeline.plugins``), each naming a ``Mode``. A mode that takes a
setting (``Mode.setting``) is named with it, ``<name>_<setting>`` (``lookup``): each setting
is a value of the ``mode`` coordinate of its own.
"""

from __future__ import annotations

import re

from pipeline.kinds.methods.modes import decode, filter, fixed_lag, predict, smooth
from pipeline.kinds.methods.modes.base import Kit, Mode, Reference
from pipeline.plugins import PluginError, Registry

BUILTIN: dict[str, Mode] = {
    "predict": predict.MODE,
    "filter": filter.MODE,
    "smooth": smooth.MODE,
    "decode": decode.MODE,
    "fixed_lag": fixed_lag.MODE,
}
"""The built-in modes: name -> ``Mode``."""

DEFAULT = ("predict", "filter")
"""The modes of a grid that names none."""

MODES = Registry[Mode]("mode", "pipeline.modes", BUILTIN)
"""Mode name (the ``mode`` coordinate and ``methods.grid.modes`` value) -> its ``Mode``: the
built-ins, then plug-ins (``pipeline.plugins``)."""

_WITH_SETTING = re.compile(r"(?P<name>.+)_(?P<setting>\d+)")


def names() -> list[str]:
    """The mode names a grid may give: each with its setting where it takes one
    (``fixed_lag_<lag>``)."""
    return [f"{name}_<{MODES[name].setting}>" if MODES[name].setting else name for name in MODES]


def allowed() -> str:
    """``names``, for an error."""
    return ", ".join(names())


def lookup(name: str) -> Mode:
    """The mode of ``name``: a registered one, or a registered mode that takes a setting
    at the setting its name ends in (``fixed_lag_2``); ``ValueError`` in one line naming the
    allowed names, ``PluginError`` for a plug-in that cannot be used."""
    if name in MODES.names():
        found = MODES[name]
        if found.setting is None:
            return found
        raise ValueError(
            f"mode {name!r} takes a setting ({found.setting}) in its name: {name}_<setting>, "
            f"e.g. {name}_2"
        )
    match = _WITH_SETTING.fullmatch(name)
    if match and match["name"] in MODES.names() and MODES[match["name"]].setting:
        return MODES[match["name"]].at(int(match["setting"]))
    raise ValueError(f"unknown mode {name!r}; allowed: {allowed()}")


__all__ = [
    "BUILTIN",
    "DEFAULT",
    "MODES",
    "Kit",
    "Mode",
    "PluginError",
    "Reference",
    "lookup",
    "names",
]
