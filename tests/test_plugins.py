"""Entry-point plug-ins: real distributions on sys.path (a ``.dist-info`` folder and a module),
found by ``importlib.metadata`` as an installed package's would be."""

import textwrap
import warnings

import numpy as np
import pytest

from pipeline.methods import BUILTIN as BUILTIN_METHODS
from pipeline.models import BUILTIN as BUILTIN_FAMILIES
from pipeline.plugins import PluginError, Registry

GOOD = """
import numpy as np
from pipeline.models import HMM

SEEDED = False


def build(n_states, seed=0, *, stay: float = 0.5):
    T = np.full((n_states, n_states), (1 - stay) / (n_states - 1))
    np.fill_diagonal(T, stay)
    return HMM(np.full(n_states, 1 / n_states), T, np.eye(n_states))
"""


def install(root, package, modules: dict[str, str], entry_points: dict[str, dict[str, str]]):
    """A distribution ``package`` 0.1 with ``modules`` (name -> source) and ``entry_points``
    (group -> name -> object), as pip would leave it in site-packages."""
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in names.items())
            for group, names in entry_points.items()
        )
    )
    for name, source in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def families() -> Registry:
    return Registry("model family", "pipeline.families", BUILTIN_FAMILIES)


def test_a_plugin_family_is_listed_after_the_builtins_and_builds(site):
    install(site, "goodpkg", {"good_family": GOOD}, {"pipeline.families": {"mine": "good_family"}})
    registry = families()
    assert list(registry) == [*BUILTIN_FAMILIES, "mine"]
    hmm = registry["mine"].build(4, stay=0.7)
    np.testing.assert_allclose(hmm.transition.diagonal(), 0.7)
    assert registry.lookup("bell") is BUILTIN_FAMILIES["bell"]
    with pytest.raises(ValueError, match=r"unknown model family 'nope'; allowed: weather, .*mine$"):
        registry.lookup("nope")


def test_a_broken_plugin_fails_in_one_line_when_used_and_only_warns_otherwise(site):
    install(
        site,
        "brokenpkg",
        {"broken_family": "import not_a_module_anywhere\n", "good_family": GOOD},
        {"pipeline.families": {"broken": "broken_family", "mine": "good_family"}},
    )
    registry = families()
    with pytest.warns(RuntimeWarning, match="broken"):
        names = list(registry)
    assert "broken" not in names and "mine" in names
    assert registry["bell"] is BUILTIN_FAMILIES["bell"]
    with pytest.raises(PluginError) as error:
        registry.lookup("broken")
    message = str(error.value)
    assert "\n" not in message
    assert "entry point broken = broken_family (brokenpkg 0.1)" in message
    assert "ModuleNotFoundError: No module named 'not_a_module_anywhere'" in message


def test_a_plugin_named_like_a_builtin_is_an_error_naming_its_entry_point(site):
    install(
        site, "clashpkg", {"clash_method": GOOD}, {"pipeline.methods": {"topk": "clash_method"}}
    )
    registry = Registry("method", "pipeline.methods", BUILTIN_METHODS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "topk" not in list(registry)
    with pytest.raises(PluginError, match=r"topk = clash_method \(clashpkg 0.1\) takes the name"):
        registry.lookup("topk")
    assert registry.lookup("topp") is BUILTIN_METHODS["topp"]
