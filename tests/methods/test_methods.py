"""The contract every approximation method passes (``pipeline.testing.methods``), run on every
built-in method at its settings; what some methods promise besides.

A new method adds its settings to ``SETTINGS`` and its bad settings to ``BAD``, and must pass
every test here.
"""

import numpy as np
import pytest

from pipeline.inference import filtering, sample
from pipeline.methods import BUILTIN, approximate, check_setting
from pipeline.models import build_model
from pipeline.operators import toarray
from pipeline.testing import methods
from pipeline.testing.random_models import random_hmm

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


@pytest.mark.parametrize("check", methods.CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize("method", sorted(BUILTIN))
def test_every_method_passes_the_contract(method, check):
    check(method, SETTINGS[method])


@pytest.mark.parametrize("method", sorted(BUILTIN))
def test_every_stored_bound_holds_on_lm_models(method, corpus):
    """The contract's ``check_bounds`` on the ``lm`` family, which reads a corpus."""
    methods.check_bounds(method, SETTINGS[method], {"lm": {"alpha": 0.05, "corpus": corpus}})


@pytest.mark.parametrize("method", ["topp", "topp_states", "topp_transitions"])
def test_top_p_keeps_each_step_within_one_minus_p(method):
    """Top-p's Theorem 4.1: the step error is at most 1 - p."""
    hmm = random_hmm(3, 25, 6, zeros=0.2)
    for setting in SETTINGS[method]:
        assert approximate(hmm, method, setting).step_error <= 1 - setting + 1e-9


@pytest.mark.parametrize("method", sorted(BUILTIN))
def test_a_bad_setting_is_a_one_line_error(method):
    methods.check_bad_settings(method, *BAD[method])
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
