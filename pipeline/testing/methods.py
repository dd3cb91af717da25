"""The contract every approximation method passes, by its registered name (a built-in or a
plug-in of the entry-point group ``pipeline.methods``):

- the approximation is a valid HMM whose row errors are the TV of each row, measured on
  the dense matrices (``check_rows``);
- every bound the sweep stores holds at every step of prediction, on models of several
  families, run through the sweep's own tasks in this process (``check_bounds``);
- structured exact models give the same approximation as their dense form
  (``check_structured``);
- a bad setting is a one-line error naming the method and what is allowed
  (``check_bad_settings``).

``check_method`` runs them all; each raises ``AssertionError`` naming the setting (and the
family) at fault.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from pipeline.methods import approximate, check_setting
from pipeline.metrics import total_variation
from pipeline.models import build_model
from pipeline.operators import toarray
from pipeline.testing.random_models import random_hmm

FAMILIES: dict[str, dict[str, Any]] = {
    "bell": {},
    "dirichlet": {"alpha": 0.2},
    "peaked": {"support": 4, "background": 0.02},
    "uniform": {},
    "weather": {},
    "kernel": {"n_features": 6},
    "banded_kernel": {"n_features": 6},
}
"""The families ``check_bounds`` runs a method on by default, with their parameters: every
built-in that reads no file (``lm`` needs a corpus: pass it with its ``corpus``)."""


def check_rows(method: str, settings: Sequence) -> None:
    """At each setting the approximation of a random 25-state HMM is row-stochastic, its
    ``row_error`` is each row's ``TV(T_i, Q_i)``, its ``prior_error`` the prior's TV, and its
    ``step_error`` at most 1."""
    hmm = random_hmm(3, 25, 6, zeros=0.2)
    T = toarray(hmm.transition)
    for setting in settings:
        approximation = approximate(hmm, method, setting)
        Q = toarray(approximation.hmm.transition)
        np.testing.assert_allclose(Q.sum(axis=1), 1.0, atol=1e-12, err_msg=f"{setting=}")
        np.testing.assert_allclose(
            approximation.row_error, total_variation(T, Q), atol=1e-12, err_msg=f"{setting=}"
        )
        prior = total_variation(hmm.prior, approximation.hmm.prior)
        assert math.isclose(approximation.prior_error, prior, rel_tol=1e-6, abs_tol=1e-12), setting
        assert approximation.step_error <= 1 + 1e-9, (setting, approximation.step_error)


def check_bounds(
    method: str, settings: Sequence, families: Mapping[str, Mapping[str, Any]] = FAMILIES
) -> None:
    """Each of ``families`` (name -> parameters), two seeds, 40 states (``weather``: 6),
    predicted 30 steps by the sweep's own tasks (``pipeline.kinds.methods.plan``): the TV
    is finite and below every bound stored beside it (``certificate``, ``bound``,
    ``bound_linear``, ``bound_mixing``), the certificate below the bound, and the cost is
    reported. Imports the sweep's tasks, and with them Dask, when called."""
    from pipeline.kinds.methods import plan, records
    from pipeline.kinds.methods.grid import Cell
    from pipeline.sweep.timing import Timing

    timing = Timing(repeats=1, min_seconds=0.0, max_repeats=1, threads=1)
    run = plan.Settings(
        horizon=30,
        observe_every=3,
        timing=timing,
        gamma_exact_max_states=10**6,
        exact_max_states=None,
    )
    for family, params in families.items():
        n = 6 if family == "weather" else 40
        for seed in (0, 1):
            spec = records.ModelSpec(family, n, seed, dict(params))
            cells = [Cell(family, n, method, float(s), seed, "predict") for s in settings]
            for cell, result in zip(cells, plan.run_model(spec, cells, run), strict=True):
                values = result.values()
                tv = values["tv"]
                assert np.isfinite(tv).all(), cell
                for name in ("certificate", "bound", "bound_linear", "bound_mixing"):
                    assert (tv <= values[name] + 1e-9).all(), (cell, name)
                assert (values["certificate"] <= values["bound"] + 1e-9).all(), cell
                assert values["stored_entries"] >= 1 and values["work"] > 0, cell
                assert np.isfinite(values["speedup"]) and values["repeats"] == 1, cell


def check_structured(method: str, settings: Sequence) -> None:
    """The approximation of the 30-state ``bell`` model stored as sparse plus rank one
    equals that of its dense form, to 1e-14."""
    dense, structured = (build_model("bell", 30, seed=2, structured=s) for s in (False, True))
    for setting in settings:
        a, b = approximate(dense, method, setting), approximate(structured, method, setting)
        np.testing.assert_allclose(
            toarray(a.hmm.transition), toarray(b.hmm.transition), rtol=0, atol=1e-14
        )
        np.testing.assert_allclose(a.row_error, b.row_error, atol=1e-14, err_msg=f"{setting=}")
        assert abs(a.prior_error - b.prior_error) <= 1e-14, setting


def check_bad_settings(method: str, bad: Iterable, message: str) -> None:
    """Each setting of ``bad`` is refused by ``check_setting`` with a one-line
    ``ValueError`` that starts with ``"<method>: "`` and matches ``message`` (a regular
    expression) after it."""
    for setting in bad:
        try:
            check_setting(method, setting)
        except ValueError as error:
            text = str(error)
            assert re.match(rf"{re.escape(method)}: {message}", text), (setting, text)
            assert "\n" not in text, (setting, text)
        else:
            raise AssertionError(f"{method} accepts the bad setting {setting!r}")


CHECKS: tuple[Callable[[str, Sequence], None], ...] = (check_rows, check_bounds, check_structured)
"""The checks of a method that take its name and good settings."""


def check_method(
    method: str,
    settings: Sequence,
    *,
    families: Mapping[str, Mapping[str, Any]] = FAMILIES,
    bad: Iterable = (),
    message: str = "",
) -> None:
    """Run every check of ``CHECKS`` on the method registered as ``method`` at each of
    ``settings`` (``check_bounds`` on ``families``), and ``check_bad_settings`` on ``bad``
    where given."""
    check_rows(method, settings)
    check_bounds(method, settings, families)
    check_structured(method, settings)
    if bad:
        check_bad_settings(method, bad, message)
