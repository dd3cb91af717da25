"""The project's contract suites, public, for plug-in authors (as ``xarray.testing`` is):
what a built-in passes, a plug-in can be held to with the same checks.

- ``check_format(factory)``: a matrix format (``pipeline.operators``), given by a factory
  ``factory(seed, n, m) -> (matrix, dense)``, against the dense matrix (``formats``);
- ``check_method(name, settings)``: an approximation method (``pipeline.methods``) at its
  settings: valid approximations, row errors that are TVs, every bound the sweep stores
  (``methods``);
- ``check_family(name, n_states, **params)``: a model family (``pipeline.models``)
  (``families``);
- ``check_kind(name, *overrides)``: a sweep kind (``pipeline.kinds``): its schema, its
  sweep's interface, the grid of a config of it (``kinds``);
- ``check_mode(*names, client=None)``: modes of the methods sweep
  (``pipeline.kinds.methods.modes``): what each declares, and one tiny sweep of them all,
  read back and reported (``modes``).

Each module is named after the registry or package whose contract it holds (``formats``
for ``pipeline.operators``, ``methods``, ``families`` for ``pipeline.models``, ``kinds``,
``modes``), so a plug-in author finds the suite by what they wrote; ``random_models`` draws
the random matrices and HMMs the suites run on. Methods, families, kinds and modes are named
as they are registered (a mode that takes a setting at one, ``fixed_lag_1``), so a plug-in
is checked as a sweep finds it, through its entry point (install the package first, ``pip
install -e .``). Each check is a plain function that raises
``AssertionError`` naming what is wrong, so a test calls it as it is; each module's
``CHECKS`` lists its checks one by one, for a test parametrised over them. Importing this
module imports neither pytest, nor Hydra, nor Dask:
``check_method`` imports the sweep's tasks, and ``check_kind`` and ``check_mode`` the config
and the engine, when called.

>>> from pipeline.testing import check_family
>>> check_family("weather", 6)
"""

from pipeline.testing.families import check_family
from pipeline.testing.formats import check_format
from pipeline.testing.kinds import check_kind
from pipeline.testing.methods import check_method
from pipeline.testing.modes import check_mode

__all__ = ["check_family", "check_format", "check_kind", "check_method", "check_mode"]
