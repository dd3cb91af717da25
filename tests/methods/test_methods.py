"""The contract every approximation method passes.

- the approximation is a valid HMM whose row errors are the TV of each row,
  measured on the dense matrices;
- every bound the sweep stores holds at every step of prediction, on models of
  every family (run through the sweep's own tasks, in this process);
- its cost is reported, and structured exact models give the same approximation
  as their dense form;
- a bad setting is a one-line error naming the allowed range.

A new method adds its settings to ``SETTINGS`` and must pass every test here.
"""

import numpy as np
import pytest

from pipeline.inference import filtering, sample
from pipeline.kinds.methods import plan, records
from pipeline.kinds.methods.grid import Cell
from pipeline.methods import BUILTIN, approximate, check_setting
from pipeline.metrics import total_variation
from pipeline.models import build_model
from pipeline.operators import toarray
from pipeline.sweep.timing import Timing

from helpers import random_hmm

SETTINGS = {
    "topp": [0.5, 0.9, 1.0],
    "topk": [1, 3, 7],
    "topp_states": [0.6, 0.95, 1.0],
    "topp_transitions": [0.5, 1.0],
    "topk_transitions": [2, 7],
    "lowrank": [1, 4],
    "banded_lowrank": [1, 4],
}
BAD = {
    "topp": ([0, 1.5, float("nan"), "0.5"], r"p must be"),
    "topk": ([0, 2.5, -3, True], r"k must be an integer >= 1"),
    "topp_states": ([0, 1.01], r"p must be"),
    "topp_transitions": ([0, 1.5], r"p must be"),
    "topk_transitions": ([0, 2.5], r"k must be an integer >= 1"),
    "lowrank": ([0, 2.5, True, "3"], r"the rank r must be an integer >= 1"),
    "banded_lowrank": ([0, -1.0], r"the rank r must be an integer >= 1"),
}
FAMILIES = {
    "bell": {},
    "dirichlet": {"alpha": 0.2},
    "peaked": {"support": 4, "background": 0.02},
    "uniform": {},
    "weather": {},
    "lm": {"alpha": 0.05},
    "kernel": {"n_features": 6},
    "banded_kernel": {"n_features": 6},
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A text of 80 word types whose bigrams follow a few fixed patterns."""
    words = [f"{chr(97 + i % 26)}{chr(97 + i // 26)}x" for i in range(80)]
    text = " ".join(words[(37 * i + 11 * (i // 80)) % 80] for i in range(4000))
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(text)
    return str(path)


def test_every_method_is_tested():
    assert set(SETTINGS) == set(BUILTIN) == set(BAD)


@pytest.mark.parametrize("method", sorted(BUILTIN))
def test_the_approximation_is_valid_and_its_row_errors_are_tvs(method):
    hmm = random_hmm(3, 25, 6, zeros=0.2)
    T = toarray(hmm.transition)
    for setting in SETTINGS[method]:
        approximation = approximate(hmm, method, setting)
        Q = toarray(approximation.hmm.transition)
        np.testing.assert_allclose(Q.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(approximation.row_error, total_variation(T, Q), atol=1e-12)
        prior = approximation.hmm.prior
        assert approximation.prior_error == pytest.approx(total_variation(hmm.prior, prior))
        assert approximation.step_error <= 1 + 1e-9
        if method in ("topp", "topp_states", "topp_transitions"):
            assert approximation.step_error <= 1 - setting + 1e-9  # top-p's Theorem 4.1


def _cells(method: str, family: str, n: int) -> list[Cell]:
    return [
        Cell(family, n, method, float(s), seed, "predict")
        for s in SETTINGS[method]
        for seed in (0, 1)
    ]


@pytest.mark.parametrize("method", sorted(BUILTIN))
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_stored_bound_holds_at_every_step(method, family, corpus):
    n = 6 if family == "weather" else 40
    params = {**FAMILIES[family], **({"corpus": corpus} if family == "lm" else {})}
    settings = plan.Settings(
        horizon=30,
        observe_every=3,
        timing=Timing(repeats=1, min_seconds=0.0, max_repeats=1, threads=1),
        gamma_exact_max_states=10**6,
        exact_max_states=None,
    )
    for seed in (0, 1):
        spec = records.ModelSpec(family, n, seed, params)
        cells = [c for c in _cells(method, family, n) if c.seed == seed]
        for cell, result in zip(cells, plan.run_model(spec, cells, settings), strict=True):
            values = result.values()
            tv = values["tv"]
            assert np.isfinite(tv).all(), cell
            for name in ("certificate", "bound", "bound_linear"):
                assert (tv <= values[name] + 1e-9).all(), (cell, name)
            assert (tv <= values["bound_mixing"] + 1e-9).all(), cell
            assert (values["certificate"] <= values["bound"] + 1e-9).all(), cell
            assert values["stored_entries"] >= 1 and values["work"] > 0
            assert np.isfinite(values["speedup"]) and values["repeats"] == 1


@pytest.mark.parametrize("method", sorted(BUILTIN))
def test_structured_models_give_the_same_approximation(method):
    dense, structured = (build_model("bell", 30, seed=2, structured=s) for s in (False, True))
    for setting in SETTINGS[method]:
        a, b = approximate(dense, method, setting), approximate(structured, method, setting)
        np.testing.assert_allclose(
            toarray(a.hmm.transition), toarray(b.hmm.transition), rtol=0, atol=1e-14
        )
        np.testing.assert_allclose(a.row_error, b.row_error, atol=1e-14)
        assert a.prior_error == pytest.approx(b.prior_error, abs=1e-14)


@pytest.mark.parametrize("method", sorted(BUILTIN))
def test_a_bad_setting_is_a_one_line_error(method):
    settings, message = BAD[method]
    for setting in settings:
        with pytest.raises(ValueError, match=rf"^{method}: {message}") as error:
            check_setting(method, setting)
        assert "\n" not in str(error.value)
    with pytest.raises(
        ValueError,
        match="unknown method 'topq'; allowed: topp, topk, topp_states, topp_transitions, "
        "topk_transitions, lowrank, banded_lowrank",
    ):
        check_setting("topq", 0.5)


@pytest.mark.parametrize(
    ("method", "alone"), [("topp", "topp_transitions"), ("topk", "topk_transitions")]
)
def test_truncating_the_transitions_alone_keeps_every_observation_possible(method, alone):
    """The variant's transitions are its method's (Definition 4's rule on each row); its prior
    and emissions are the exact ones, so a sequence drawn from the exact model, which the
    truncated emissions rule out, keeps a finite likelihood."""
    hmm = build_model("bell", 60, seed=3)
    setting = 0.5 if method == "topp" else 2
    full, transitions = approximate(hmm, method, setting), approximate(hmm, alone, setting)
    np.testing.assert_array_equal(toarray(transitions.hmm.transition), toarray(full.hmm.transition))
    np.testing.assert_array_equal(transitions.row_error, full.row_error)
    np.testing.assert_array_equal(transitions.hmm.prior, hmm.prior)
    assert transitions.hmm.emission is hmm.emission and transitions.prior_error == 0.0
    observations = sample(hmm, 40, seed=0).observations
    ruled_out = filtering(full.hmm, observations)
    kept = filtering(transitions.hmm, observations)
    assert ruled_out.log_evidence == -np.inf and ruled_out.zero_evidence.size > 0
    assert np.isfinite(kept.log_evidence) and kept.zero_evidence.size == 0
