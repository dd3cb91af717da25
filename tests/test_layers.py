"""The layers import in order. Read from the source: no module of ``pipeline`` imports one
that imports it back, however far round (a module-import graph, every import counted: at
the top, inside a function, under ``TYPE_CHECKING``), and none imports a module of a
higher layer (``docs/development.md``). Run: ``import pipeline`` loads no store or cluster
library, and the ``HMM`` container with inference loads nothing above them (no family, no
HMM LM code, no corpus, no approximation method). What ``python -X importtime -c "import
pipeline.inference"`` lists is what ``sys.modules`` holds afterwards; one process checks
both imports, and that ``pipeline.testing`` imports no pytest, Dask or Hydra."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline
from pipeline.models import BUILTIN

PACKAGE = Path(pipeline.__file__).parent


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package by its dotted name: its file, and whether it is a
    package's ``__init__``."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        init = parts[-1] == "__init__"
        found[".".join(parts[:-1] if init else parts)] = (path, init)
    return found


def _imports(name: str, path: Path, init: bool, modules) -> set[str]:
    """The modules of the package that ``name`` imports anywhere in its source. ``from a
    import b`` imports the module ``a.b`` where there is one, else ``a``; a name inside a
    module (``a.b.f``) is its module's. A package's ``__init__``, which Python runs before
    any module inside it, is counted only where it is imported by name, as import
    checkers (grimp, import-linter) count it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".")[: len(name.split(".")) - (0 if init else 1)]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (``_imports``)."""
    modules = _modules()
    return {name: _imports(name, *where, modules) for name, where in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, round and round (the strongly connected
    components of more than one module, Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


LAYERS = (
    ("kernels", "corpus", "plugins", "shapes", "environment"),
    ("operators",),
    ("hmm", "limits"),
    ("inference", "methods", "metrics", "sampling", "hmmlm"),
    ("models", "coupled", "learning"),
    ("results",),
    ("sweep", "analysis"),
    ("kinds",),
    ("analyze", "cli", "testing"),
)
"""The packages and modules of ``pipeline``, lowest layer first: the one list of the layers
(``docs/development.md`` tours them in this order, checked by ``tests/test_development``)."""


def layer(module: str) -> tuple[int, str]:
    """The layer of ``module`` (its index in ``LAYERS``) and its package (or top-level module)."""
    part = module.split(".")[1]
    (at,) = [k for k, names in enumerate(LAYERS) if part in names]
    return at, part


def test_no_modules_import_each_other_round_a_circle():
    assert circles(import_graph()) == []


def test_a_circle_is_found_however_far_round():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"]]


def out_of_order(graph: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    """The imports of ``graph`` from a lower layer up, and those between the sweep and the
    reports, each ``"module -> imported"``."""
    upward, across = [], []
    for module, imported in graph.items():
        if module == "pipeline":  # the package's face: it imports nothing until asked
            continue
        for other in imported - {"pipeline"}:  # its version, which every layer may read
            (at, part), (other_at, other_part) = layer(module), layer(other)
            if other_at > at:
                upward.append(f"{module} -> {other}")
            elif {part, other_part} == {"sweep", "analysis"}:
                across.append(f"{module} -> {other}")
    return upward, across


def test_no_module_imports_a_higher_layer_and_the_sweep_and_reports_stay_apart():
    assert out_of_order(import_graph()) == ([], [])


def test_an_import_from_a_lower_layer_up_is_found():
    """The registry read by every layer imported from the kinds above them, as it once was."""
    graph = {
        "pipeline.results.paths": {"pipeline.kinds", "pipeline.plugins"},
        "pipeline.sweep.kind": {"pipeline.analysis.base", "pipeline.results"},
        "pipeline.kinds": {"pipeline.sweep.kind"},
    }
    assert out_of_order(graph) == (
        ["pipeline.results.paths -> pipeline.kinds"],
        ["pipeline.sweep.kind -> pipeline.analysis.base"],
    )


STORE_AND_CLUSTER = ("xarray", "zarr", "dask", "distributed", "hydra", "omegaconf")
"""What reading or running a sweep needs, and the library below it does not."""

ABOVE_INFERENCE = (
    "pipeline.models",
    "pipeline.methods",
    "pipeline.hmmlm",
    "pipeline.corpus",
    "pipeline.kinds",
    "pipeline.results",
    "pipeline.sweep",
    *sorted(family.__name__ for family in BUILTIN.values()),
)
"""The packages above ``pipeline.hmm`` and ``pipeline.inference``, and every built-in family."""

CODE = """
import json, sys
import pipeline
package = sorted(sys.modules)
import pipeline.hmm, pipeline.inference
inference = sorted(sys.modules)
import pipeline.testing
testing = sorted(sys.modules)
lazy = pipeline.open_results is pipeline.results.open_results
print(json.dumps([package, inference, testing, lazy]))
"""


def _within(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """The ``modules`` that are one of ``packages`` or inside one."""
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in packages)]


@pytest.mark.slow
def test_the_package_and_inference_import_nothing_above_them():
    """Nor do the contract suites import pytest, the cluster or the config until a check
    that needs them runs."""
    result = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    package, inference, testing, lazy = json.loads(result.stdout)
    assert _within(testing, ("pytest", "dask", "distributed", "hydra", "omegaconf")) == []
    assert _within(package, STORE_AND_CLUSTER) == []
    assert "pipeline.results" not in package
    assert {"pipeline.hmm", "pipeline.inference", "pipeline.limits"} <= set(inference)
    assert _within(inference, STORE_AND_CLUSTER + ABOVE_INFERENCE) == []
    assert lazy  # pipeline.open_results still answers, importing pipeline.results then


KIND_FILES = ("config", "grid", "tasks", "sweep", "results", "report")
"""The files every kind's folder has (``docs/development.md``, "A sweep kind"): each kind's
own, the same names by design."""


def test_modules_that_share_a_name_name_each_other_in_their_docstrings():
    """No two modules share a name across packages without a reason in their docstrings: each
    names its namesakes (the kinds' folder files and the packages' ``base`` classes aside)."""
    groups: dict[str, list[Path]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        in_kind = relative.parts[0] == "kinds" and len(relative.parts) == 3
        if path.stem in ("__init__", "__main__", "base") or (in_kind and path.stem in KIND_FILES):
            continue
        groups.setdefault(path.stem, []).append(path)
    unexplained = []
    for paths in groups.values():
        for path in paths:
            text = ast.get_docstring(ast.parse(path.read_text())) or ""
            for other in paths:
                dotted = ".".join(("pipeline", *other.relative_to(PACKAGE).with_suffix("").parts))
                if other != path and dotted not in text:
                    unexplained.append(f"{path.relative_to(PACKAGE)} -> {dotted}")
    assert unexplained == []
