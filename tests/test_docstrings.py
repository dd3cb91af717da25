"""Every ``>>>`` example in the package's docstrings runs and shows what it says (the API
reference publishes them); an example that needs a cluster says ``# doctest: +SKIP``."""

import doctest
import importlib
import pkgutil

import pytest

import pipeline

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(pipeline.__path__, "pipeline.")
    if not info.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(module, name, globs=vars(module).copy()):
        if test.examples and test.name.split(".")[0] == "pipeline":
            runner.run(test)
    assert runner.failures == 0, f"{runner.failures} of {runner.tries} examples failed in {name}"
