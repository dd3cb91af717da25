"""``fit`` against outside references: hmmlearn's EM iteration by iteration (categorical and
Gaussian), a brute force over every state path for ragged sequences with missing steps, the
dense model against its CSR form; and its property (exact EM never lowers the likelihood),
its support rule, its history and its one-line refusals."""

import numpy as np
import pytest
import scipy.sparse as sp
from hmmlearn.hmm import CategoricalHMM, GaussianHMM
from hypothesis import given, settings
from hypothesis import strategies as st
from inference import brute_force

from pipeline.inference import filtering, sample
from pipeline.learning import VARIANCE_FLOOR, Categorical, Gaussian, fit
from pipeline.methods import approximate
from pipeline.models import HMM, build_model
from pipeline.operators import toarray
from pipeline.testing.random_models import random_hmm

from helpers import random_low_rank, random_structured

RAGGED = [7, 12, 3, 9, 12]
"""Sequence lengths of the hmmlearn comparisons: ragged, two of one length."""


def _symbols(seed: int, lengths: list[int], m: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, m, length) for length in lengths]


def _hmmlearn_steps(reference, X, lengths, iterations: int):
    """hmmlearn's EM one iteration at a time (``n_iter=1``, nothing re-initialised): each
    iteration's log-likelihood (its monitor's), ``reference`` then holding the parameters
    after it."""
    for _ in range(iterations):
        reference.fit(X, lengths)
        yield reference.monitor_.history[0]


def _categorical_reference(
    hmm: HMM, n_iter: int = 1, tol: float = 1e-2, pseudocount: float = 0.0
) -> CategoricalHMM:
    reference = CategoricalHMM(
        n_components=hmm.n_states,
        n_features=hmm.n_observations,
        emissionprob_prior=1.0 + pseudocount,
        params="ste",
        init_params="",
        n_iter=n_iter,
        tol=tol,
        implementation="scaling",
    )
    reference.startprob_ = hmm.prior.copy()
    reference.transmat_ = toarray(hmm.transition).copy()
    reference.emissionprob_ = toarray(hmm.emission).copy()
    return reference


@pytest.mark.parametrize("pseudocount", [0.0, 0.5])
def test_exact_em_equals_hmmlearn_categorical_iteration_by_iteration(pseudocount):
    start = random_hmm(1, 4, 5)
    sequences = _symbols(2, RAGGED, 5)
    reference = _categorical_reference(start, pseudocount=pseudocount)
    X = np.concatenate(sequences)[:, None]
    for k, log_likelihood in enumerate(_hmmlearn_steps(reference, X, RAGGED, 8), start=1):
        ours = fit(start, sequences, iterations=k, tolerance=0.0, pseudocount=pseudocount)
        assert ours.history.log_likelihood.size == k and not ours.history.converged
        np.testing.assert_allclose(
            ours.history.log_likelihood[-1], log_likelihood, rtol=0, atol=1e-8
        )
        np.testing.assert_allclose(ours.hmm.prior, reference.startprob_, rtol=0, atol=1e-8)
        np.testing.assert_allclose(ours.hmm.transition, reference.transmat_, rtol=0, atol=1e-8)
        np.testing.assert_allclose(ours.hmm.emission, reference.emissionprob_, rtol=0, atol=1e-8)


def test_convergence_follows_hmmlearns_monitor():
    start = random_hmm(3, 3, 4)
    sequences = _symbols(4, RAGGED, 4)
    reference = _categorical_reference(start, n_iter=500, tol=1e-2)
    reference.fit(np.concatenate(sequences)[:, None], RAGGED)
    ours = fit(start, sequences, iterations=500, tolerance=1e-2)
    assert ours.history.converged and reference.monitor_.converged
    np.testing.assert_allclose(
        ours.history.log_likelihood, list(reference.monitor_.history), rtol=0, atol=1e-8
    )
    np.testing.assert_allclose(ours.hmm.transition, reference.transmat_, rtol=0, atol=1e-8)


def test_exact_em_equals_hmmlearn_gaussian_iteration_by_iteration():
    rng = np.random.default_rng(5)
    n = 3
    start = HMM(rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n), n), np.ones((n, 1)))
    emission = Gaussian(np.array([-2.0, 0.0, 3.0]), np.array([1.0, 0.5, 2.0]))
    sequences = [rng.normal(rng.choice(emission.means, size), 1.0) for size in RAGGED]
    reference = GaussianHMM(
        n_components=n,
        covariance_type="diag",
        params="stmc",
        init_params="",
        n_iter=1,
        means_prior=0,
        means_weight=0,
        covars_prior=0,
        covars_weight=1,
        implementation="scaling",
    )
    reference.startprob_ = start.prior.copy()
    reference.transmat_ = toarray(start.transition).copy()
    reference.means_ = emission.means[:, None].copy()
    reference.covars_ = emission.variances[:, None].copy()
    X = np.concatenate(sequences)[:, None]
    for k, log_likelihood in enumerate(_hmmlearn_steps(reference, X, RAGGED, 6), start=1):
        ours = fit(start, sequences, emission=emission, iterations=k, tolerance=0.0)
        fitted = ours.emission
        assert fitted.variances.min() > VARIANCE_FLOOR  # the floor, which hmmlearn lacks, unused
        np.testing.assert_allclose(
            ours.history.log_likelihood[-1], log_likelihood, rtol=0, atol=1e-8
        )
        np.testing.assert_allclose(ours.hmm.prior, reference.startprob_, rtol=0, atol=1e-8)
        np.testing.assert_allclose(ours.hmm.transition, reference.transmat_, rtol=0, atol=1e-8)
        np.testing.assert_allclose(fitted.means, reference.means_.ravel(), rtol=0, atol=1e-8)
        np.testing.assert_allclose(fitted.variances, reference.covars_.ravel(), rtol=0, atol=1e-8)


def _brute_force_em(prior, T, E, sequences):
    """One Baum-Welch iteration by enumerating every state path of every sequence: the
    log-likelihood and the new prior, transition and emission (dense)."""
    start, counts, emitted = np.zeros_like(prior), np.zeros_like(T), np.zeros_like(E)
    total = 0.0
    for sequence in sequences:
        logs = brute_force.symbol_log_likelihoods(E, sequence)
        posteriors, evidence, pairs = brute_force.smoothing(prior, T, logs)
        total += evidence
        start += posteriors[0]
        counts += pairs
        for t, symbol in enumerate(sequence):
            if symbol >= 0:
                emitted[:, symbol] += posteriors[t]
    return (
        total,
        start / start.sum(),
        counts / counts.sum(axis=1, keepdims=True),
        emitted / emitted.sum(axis=1, keepdims=True),
    )


def test_ragged_sequences_with_missing_steps_equal_brute_force():
    start = random_hmm(6, 3, 3)
    sequences = [
        np.array([0, -1, 2, 1, 1]),
        np.array([2]),
        np.array([-1, -1, 0]),
        np.array([1, 0, -1, 2]),
        np.array([2, 2, 0, 1, -1]),
    ]
    prior, T, E = start.prior, toarray(start.transition), toarray(start.emission)
    ours = fit(start, sequences, iterations=3, tolerance=0.0)
    for k in range(3):
        total, prior, T, E = _brute_force_em(prior, T, E, sequences)
        np.testing.assert_allclose(ours.history.log_likelihood[k], total, rtol=1e-12)
    np.testing.assert_allclose(ours.hmm.prior, prior, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.hmm.transition, T, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.hmm.emission, E, rtol=0, atol=1e-12)
    as_model = fit(start, sequences, emission=Categorical(start.emission), iterations=3)
    np.testing.assert_allclose(as_model.emission.probabilities, E, rtol=0, atol=1e-12)
    np.testing.assert_allclose(as_model.hmm.transition, T, rtol=0, atol=1e-12)


def test_the_forms_of_observations_agree():
    start = random_hmm(7, 3, 4)
    batch = np.array(_symbols(8, [6, 6, 6], 4))
    as_batch = fit(start, batch, iterations=3)
    as_list = fit(start, list(batch), iterations=3)
    as_lists = fit(start, [row.tolist() for row in batch], iterations=3)
    for other in (as_list, as_lists):
        np.testing.assert_array_equal(other.history.log_likelihood, as_batch.history.log_likelihood)
        np.testing.assert_array_equal(other.hmm.transition, as_batch.hmm.transition)
    one = fit(start, batch[0].tolist(), iterations=3)
    np.testing.assert_array_equal(
        one.hmm.emission, fit(start, batch[:1], iterations=3).hmm.emission
    )


@settings(max_examples=25)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 4),
    m=st.integers(1, 4),
    lengths=st.lists(st.integers(1, 8), min_size=1, max_size=4),
    missing=st.floats(0, 0.5),
)
def test_exact_em_never_lowers_the_log_likelihood(seed, n, m, lengths, missing):
    start = random_hmm(seed, n, m, zeros=0.3)
    rng = np.random.default_rng(seed)
    sequences = []
    for b, length in enumerate(lengths):  # drawn from the start, so it can emit them
        drawn = sample(start, length - 1, seed=[seed, b]).observations
        sequences.append(np.where(rng.random(length) < missing, -1, drawn))
    history = fit(start, sequences, iterations=8, tolerance=0.0).history
    scale = np.abs(history.log_likelihood).max()
    assert (np.diff(history.log_likelihood) >= -1e-10 * max(scale, 1.0)).all()


@pytest.mark.parametrize(("method", "setting"), [("topp", 1.0), ("topk", 4)])
@pytest.mark.parametrize("emitted", ["symbols", "gaussian"])
def test_an_approximation_that_keeps_everything_is_exact_em(method, setting, emitted):
    start = random_hmm(9, 4, 3)
    if emitted == "symbols":
        sequences, emission = _symbols(10, [5, 8, 8], 3), None
    else:
        rng = np.random.default_rng(10)
        sequences = [rng.normal(0, 2, size) for size in (5, 8, 8)]
        emission = Gaussian(np.array([-2.0, -1.0, 1.0, 2.0]), np.ones(4))
    exact = fit(start, sequences, emission=emission, iterations=6, tolerance=0.0)
    kept = fit(
        start,
        sequences,
        emission=emission,
        approximation=method,
        setting=setting,
        iterations=6,
        tolerance=0.0,
    )
    np.testing.assert_allclose(
        kept.history.log_likelihood, exact.history.log_likelihood, rtol=1e-12
    )
    for name in ("prior", "transition", "emission"):
        np.testing.assert_allclose(
            toarray(np.atleast_2d(getattr(kept.hmm, name))),
            toarray(np.atleast_2d(getattr(exact.hmm, name))),
            rtol=0,
            atol=1e-12,
        )
    if emission is not None:
        np.testing.assert_allclose(kept.emission.means, exact.emission.means, rtol=1e-12)
        np.testing.assert_allclose(kept.emission.variances, exact.emission.variances, rtol=1e-12)


@pytest.mark.parametrize("approximation", [None, ("topp", 0.8)])
def test_a_csr_model_keeps_its_pattern_and_learns_as_its_dense_form(approximation):
    dense = random_hmm(11, 5, 4, zeros=0.4)
    csr = HMM(dense.prior, sp.csr_array(dense.transition), sp.csr_array(dense.emission))
    sequences = [sample(dense, 9, seed=[12, b]).observations for b in range(6)]
    method, setting = approximation or (None, None)
    kw = {"approximation": method, "setting": setting, "iterations": 5, "tolerance": 0.0}
    if method is not None:
        kw["emission"] = Categorical(dense.emission)
    from_csr, from_dense = fit(csr, sequences, **kw), fit(dense, sequences, **kw)
    for name in ("transition",) + (("emission",) if method is None else ()):
        before, after = getattr(csr, name), getattr(from_csr.hmm, name)
        assert isinstance(after, sp.csr_array)
        np.testing.assert_array_equal(after.indices, before.indices)
        np.testing.assert_array_equal(after.indptr, before.indptr)
        np.testing.assert_allclose(after.toarray(), getattr(from_dense.hmm, name), atol=1e-12)
    np.testing.assert_allclose(
        from_csr.history.log_likelihood, from_dense.history.log_likelihood, rtol=1e-12
    )


def test_the_entries_an_approximation_did_not_keep_hold_their_values():
    start = random_hmm(13, 5, 4)
    sequences = _symbols(14, [6, 9, 9, 4], 4)
    emission = Categorical(start.emission)
    fitted = fit(start, sequences, emission=emission, approximation="topk", setting=2, iterations=1)
    T, new = toarray(start.transition), toarray(fitted.hmm.transition)
    for i in range(5):
        kept = np.argsort(-T[i], kind="stable")[:2]
        dropped = np.setdiff1d(np.arange(5), kept)
        np.testing.assert_array_equal(new[i, dropped], T[i, dropped])
        assert new[i, kept].sum() == pytest.approx(T[i, kept].sum(), abs=1e-12)
    assert np.isin(
        np.flatnonzero(fitted.hmm.prior != start.prior), np.argsort(-start.prior)[:2]
    ).all()
    np.testing.assert_allclose(fitted.hmm.transition.sum(axis=1), 1.0, atol=1e-12)


def test_a_pseudocount_keeps_unseen_symbols_possible_and_held_entries_held():
    start = random_hmm(23, 4, 6)
    sequences = [np.array([0, 1, 2, 1]), np.array([2, 0, 0])]  # symbols 3..5 never seen
    held = [np.array([3, 4, 5])]
    plain = fit(start, sequences, iterations=3, tolerance=0.0, held_out=held)
    assert (plain.hmm.emission[:, 3:] == 0).all() and plain.history.held_out[-1] == -np.inf
    smoothed = fit(start, sequences, iterations=3, tolerance=0.0, held_out=held, pseudocount=0.1)
    assert (smoothed.hmm.emission[:, 3:] > 0).all() and np.isfinite(smoothed.history.held_out).all()
    one = fit(start, sequences, iterations=1, approximation="topk", setting=4, pseudocount=0.1)
    E, new = toarray(start.emission), toarray(one.hmm.emission)
    unseen_kept = 0
    for i in range(4):  # top-4 of 6 symbols kept, each learnt with its pseudocount
        kept = np.argsort(-E[i], kind="stable")[:4]
        dropped = np.setdiff1d(np.arange(6), kept)
        np.testing.assert_array_equal(new[i, dropped], E[i, dropped])
        unseen = np.intersect1d(kept, [3, 4, 5])
        assert (new[i, unseen] > 0).all()  # zero without the pseudocount
        unseen_kept += unseen.size
    assert unseen_kept > 0
    np.testing.assert_allclose(new.sum(axis=1), 1.0, atol=1e-12)


def test_a_state_without_counts_keeps_its_rows():
    rng = np.random.default_rng(15)
    T = rng.dirichlet(np.ones(3), 3)
    T[:2, 2] = 0.0  # state 2: not in the prior, no way in
    T[:2] /= T[:2].sum(axis=1, keepdims=True)
    start = HMM(np.array([0.5, 0.5, 0.0]), T, rng.dirichlet(np.ones(3), 3))
    fitted = fit(start, _symbols(16, [5, 7], 3), iterations=4).hmm
    np.testing.assert_array_equal(fitted.transition[2], T[2])
    np.testing.assert_array_equal(fitted.emission[2], start.emission[2])
    assert fitted.prior[2] == 0 and (fitted.transition[:2, 2] == 0).all()


@pytest.mark.parametrize(
    ("transition", "name"),
    [
        (lambda: random_structured(17, 4, 4), "SparsePlusRankOne"),
        (lambda: random_low_rank(17, 4, 4, rank=2), "LowRank"),
    ],
)
def test_structured_and_low_rank_transitions_are_refused_in_one_line(transition, name):
    base = random_hmm(17, 4, 3)
    hmm = HMM(base.prior, transition(), base.emission)
    with pytest.raises(
        ValueError, match=rf"^hmm.transition is {name}.*pass a dense or CSR model"
    ) as error:
        fit(hmm, [0, 1, 2])
    assert "\n" not in str(error.value)


def test_history_records_each_iteration_and_why_it_stopped():
    truth = build_model("dirichlet", 4, seed=0, alpha=1.0)
    data = sample(truth, 29, seed=1, n_sequences=10).observations
    held = sample(truth, 19, seed=2, n_sequences=5).observations
    start = random_hmm(18, 4, 4)
    ran_out = fit(start, data, iterations=3, tolerance=0.0, held_out=held)
    history = ran_out.history
    assert not history.converged
    for field in (history.log_likelihood, history.held_out, history.e_step_seconds):
        assert field.shape == (3,)
    assert (history.e_step_seconds > 0).all() and (history.m_step_seconds > 0).all()
    assert history.held_out[-1] == pytest.approx(
        filtering(ran_out.hmm, held).log_evidence.sum(), rel=1e-12
    )
    assert history.log_likelihood[1] == pytest.approx(
        filtering(fit(start, data, iterations=1).hmm, data).log_evidence.sum(), rel=1e-12
    )
    stopped = fit(start, data, iterations=50, tolerance=np.inf).history
    assert stopped.converged and stopped.log_likelihood.size == 2 and stopped.held_out is None


def test_a_sequence_the_approximation_rules_out_is_refused_naming_it():
    start = build_model("dirichlet", 6, seed=0)  # peaked rows: top-p 0.5 drops symbols
    data = sample(start, 19, seed=1, n_sequences=4).observations
    refused = (
        r"^observations\[\d\] has probability zero under the topp \(p=0.5\) approximation "
        r"of iteration 1's parameters .*approximation='topp_transitions' truncates the "
        r"transitions alone$"
    )
    with pytest.raises(ValueError, match=refused) as error:
        fit(start, data, approximation="topp", setting=0.5)
    assert "\n" not in str(error.value)
    exact_emissions = fit(
        start, data, approximation="topp", setting=0.5, emission=Categorical(start.emission)
    )
    assert np.isfinite(exact_emissions.history.log_likelihood).all()
    alone = fit(start, data, approximation="topp_transitions", setting=0.5).history
    first = approximate(start, "topp_transitions", 0.5).hmm
    assert alone.log_likelihood[0] == pytest.approx(
        filtering(first, data).log_evidence.sum(), rel=1e-12
    )
    assert np.isfinite(alone.log_likelihood).all()


def test_a_sequence_the_initial_model_rules_out_is_refused_naming_it():
    E = np.array([[0.5, 0.5, 0.0], [0.2, 0.8, 0.0]])
    start = HMM(np.array([0.5, 0.5]), np.full((2, 2), 0.5), E)
    with pytest.raises(
        ValueError,
        match=r"^observations\[1\] has probability zero under the model \(1 of 2 sequences\)",
    ):
        fit(start, [[0, 1], [1, 2, 0]])


def test_belief_pruning_is_refused_in_one_line():
    start = random_hmm(19, 3, 3)
    with pytest.raises(ValueError, match=r"^topp_states prunes the belief"):
        fit(start, [0, 1, 2], approximation="topp_states", setting=0.9)
    exact = fit(start, [0, 1, 2], iterations=2)  # p = 1 prunes nothing
    pruned_none = fit(start, [0, 1, 2], approximation="topp_states", setting=1.0, iterations=2)
    np.testing.assert_array_equal(pruned_none.hmm.transition, exact.hmm.transition)


BAD = [
    ({"observations": np.zeros((2, 2, 2), int)}, r"^observations has shape \(2, 2, 2\); allowed"),
    ({"observations": [0, 3, 1]}, r"^observations\[1\] = 3; allowed: 0\.\.2, or -1 for none"),
    ({"observations": [[0, 1], [1, -2]]}, r"^observations\[1\]\[1\] = -2; allowed"),
    ({"observations": [0.0, 1.0]}, r"^observations has dtype float64; allowed: integer symbols"),
    ({"observations": [[0, 1], []]}, r"^observations\[1\] has shape \(0,\); allowed: a 1-D"),
    ({"observations": np.zeros((0, 3), int)}, r"^observations holds no sequence"),
    ({"held_out": [0, 7]}, r"^held_out\[1\] = 7; allowed"),
    ({"iterations": 0}, r"^iterations must be an integer >= 1, got 0"),
    ({"iterations": 2.5}, r"^iterations must be an integer >= 1, got 2\.5"),
    ({"tolerance": float("nan")}, r"^tolerance must be a number >= 0, got nan"),
    ({"tolerance": -1}, r"^tolerance must be a number >= 0, got -1"),
    ({"pseudocount": -0.5}, r"^pseudocount must be a number >= 0, got -0\.5"),
    (
        {"emission": Categorical(np.full((3, 3), 1 / 3)), "pseudocount": 1},
        r"^pseudocount=1 smooths the symbols of hmm\.emission.*allowed: pseudocount=0",
    ),
    ({"setting": 0.9}, r"^setting=0\.9 is given without an approximation; allowed: .*topp"),
    (
        {"approximation": "nope", "setting": 1},
        r"^approximation: unknown method 'nope'; allowed: topp",
    ),
    (
        {"approximation": "topp", "setting": 1.5},
        r"^setting of topp: p must be in \(0, 1\], got 1\.5",
    ),
    (
        {"approximation": "topk", "setting": None},
        r"^setting of topk: k must be an integer >= 1, got None",
    ),
    (
        {"emission": Gaussian([0.0, 1.0], [1.0, 1.0]), "observations": [0.5, float("nan")]},
        r"^observations\[1\] = nan; allowed: finite numbers",
    ),
    (
        {"emission": Gaussian([0.0, 1.0], [1.0, 1.0]), "observations": [0.5, 1.5]},
        r"^emission.log_likelihoods gives shape \(2, 2\) .* needs \(2, 3\)",
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD)
def test_bad_input_is_refused_in_one_line_naming_the_argument(change, message):
    arguments = {"observations": [0, 1, 2], **change}
    with pytest.raises(ValueError, match=message) as error:
        fit(random_hmm(20, 3, 3), **arguments)
    assert "\n" not in str(error.value)


def test_a_plugin_method_is_an_e_step_like_the_builtins(tmp_path, monkeypatch):
    from pipeline import methods
    from pipeline.plugins import Registry

    info = tmp_path / "floorpkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: floorpkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pipeline.methods]\nfloor = floor_method\n")
    (tmp_path / "floor_method.py").write_text(FLOOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(methods, "METHODS", Registry("method", "pipeline.methods", methods.BUILTIN))
    start = random_hmm(21, 4, 3)
    fitted = fit(
        start, _symbols(22, [8, 8, 5], 3), approximation="floor", setting=0.2, iterations=3
    )
    T, new = toarray(start.transition), toarray(fitted.hmm.transition)
    np.testing.assert_array_equal(new[T < 0.2], T[T < 0.2])  # never kept: held
    assert not np.allclose(new[T >= 0.2], T[T >= 0.2])
    with pytest.raises(
        ValueError, match=r"^approximation: unknown method 'nope'; allowed: .*floor"
    ):
        fit(start, [0, 1], approximation="nope", setting=1)


FLOOR = """
import numpy as np
import scipy.sparse as sp

from pipeline.methods.base import Approximation
from pipeline.models import HMM

SETTING = "floor"


def check(setting):
    if not 0 < setting < 1:
        raise ValueError("the floor must be in (0, 1)")


def approximate(hmm, setting):
    T = hmm.transition
    kept = np.where((T >= setting) | (T == T.max(axis=1, keepdims=True)), T, 0.0)
    Q = kept / kept.sum(axis=1, keepdims=True)
    errors = 0.5 * np.abs(T - Q).sum(axis=1)
    return Approximation(HMM(hmm.prior, sp.csr_array(Q), hmm.emission), 1.0, 0.0, errors)
"""
