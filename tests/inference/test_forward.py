import doctest
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from cases import symbols, tiny_cases
from hmmlearn.hmm import CategoricalHMM
from hypothesis import given

from pipeline import inference
from pipeline.inference import FilterBatchResult, FilterResult, filtering, filtering_chunks, predict
from pipeline.methods.topp import topp_hmm
from pipeline.models import HMM, build_model
from pipeline.operators import toarray
from pipeline.testing.random_models import random_hmm

from helpers import algorithm_1, brute_force_filter


def as_sparse(hmm):
    return HMM(hmm.prior, sp.csr_array(hmm.transition), sp.csr_array(hmm.emission))


@pytest.mark.parametrize("backend", [lambda h: h, as_sparse], ids=["dense", "sparse"])
@given(**tiny_cases())
def test_brute_force_enumeration(backend, seed, n, m, observed):
    hmm = backend(random_hmm(seed, n, m))
    observations = symbols(observed, m)
    result = filtering(hmm, observations)
    dense = (toarray(hmm.transition), toarray(hmm.emission))
    beliefs, log_evidence = brute_force_filter(hmm.prior, *dense, observations)
    np.testing.assert_allclose(result.beliefs, beliefs, rtol=1e-10, atol=1e-13)
    assert result.log_evidence == pytest.approx(log_evidence, rel=1e-10, abs=1e-12)
    assert result.zero_evidence.size == 0


@pytest.mark.parametrize("n", [5, 40, 300])
def test_against_hmmlearn_forward_pass(n):
    rng = np.random.default_rng(n)
    hmm = random_hmm(n, n, 7)
    observations = rng.integers(0, 7, size=60)
    reference = CategoricalHMM(n_components=n, n_features=7, implementation="scaling")
    reference.startprob_, reference.transmat_ = hmm.prior, hmm.transition
    reference.emissionprob_ = hmm.emission
    # hmmlearn's public API gives smoothed posteriors; the last one of each prefix is a filter.
    expected = np.array(
        [reference.score_samples(observations[: t + 1, None])[1][-1] for t in range(60)]
    )
    for model in (hmm, as_sparse(hmm)):
        result = filtering(model, observations)
        np.testing.assert_allclose(result.beliefs, expected, rtol=1e-9, atol=1e-14)
        assert result.log_evidence == pytest.approx(
            reference.score(observations[:, None]), rel=1e-10
        )


@pytest.mark.parametrize("family", ["bell", "dirichlet", "lm_small"])
def test_dense_and_sparse_agree_at_p_1(family, tmp_path):
    if family == "lm_small":
        corpus = tmp_path / "c.txt"
        corpus.write_text(
            " ".join(f"w{chr(97 + i % 13)} w{chr(97 + i * 7 % 11)}" for i in range(300))
        )
        hmm = build_model("lm", 12, corpus=str(corpus))
    else:
        hmm = build_model(family, 60, seed=2)
    top = topp_hmm(hmm, 1.0)
    assert isinstance(top.transition, sp.csr_array) and isinstance(hmm.transition, np.ndarray)
    np.testing.assert_allclose(predict(top, 30), predict(hmm, 30), rtol=0, atol=1e-12)
    observations = np.random.default_rng(0).integers(-1, hmm.n_observations, 31)
    exact, sparse = filtering(hmm, observations), filtering(top, observations)
    np.testing.assert_allclose(sparse.beliefs, exact.beliefs, rtol=0, atol=1e-12)
    assert sparse.log_evidence == pytest.approx(exact.log_evidence, abs=1e-9)


def test_predict_is_prior_times_powers():
    hmm = build_model("weather", 6)
    beliefs = predict(hmm, 4)
    assert beliefs.shape == (5, 6)
    for t in range(5):
        expected = hmm.prior @ np.linalg.matrix_power(hmm.transition, t)
        np.testing.assert_allclose(beliefs[t], expected)
    np.testing.assert_array_equal(predict(hmm, 0), hmm.prior[None, :])


@pytest.mark.parametrize("backend", [lambda h: h, as_sparse], ids=["dense", "sparse"])
def test_zero_evidence_keeps_the_prediction(backend):
    hmm = backend(HMM(np.array([1.0, 0.0]), np.array([[0.5, 0.5], [0.0, 1.0]]), np.eye(2)))
    result = filtering(hmm, np.array([1, 0, -1, 1]))
    np.testing.assert_array_equal(result.zero_evidence, [0])
    assert result.log_evidence == -np.inf
    np.testing.assert_allclose(result.beliefs, [[1, 0], [1, 0], [0.5, 0.5], [0, 1]])
    assert np.isfinite(result.beliefs).all()


def test_zero_evidence_in_a_top_p_model():
    # Top-0.5 of a uniform emission row keeps symbols 0..4 only: symbol 7 becomes impossible.
    top = topp_hmm(build_model("uniform", 10), 0.5)
    result = filtering(top, np.array([3, 7, -1, 7, 2]))
    np.testing.assert_array_equal(result.zero_evidence, [1, 3])
    assert result.log_evidence == -np.inf and np.isfinite(result.beliefs).all()
    np.testing.assert_allclose(result.beliefs.sum(axis=1), 1.0)


def test_elapsed_is_cumulative():
    for hmm in (build_model("bell", 50), topp_hmm(build_model("bell", 50), 0.9)):
        elapsed = filtering(hmm, np.full(20, -1)).elapsed
        assert elapsed.shape == (20,) and elapsed[0] >= 0 and np.all(np.diff(elapsed) >= 0)


def test_bad_arguments():
    hmm = build_model("weather", 6)
    with pytest.raises(ValueError, match=r"observations\[2\] = 2; allowed: -1 \(none\) or 0..1"):
        filtering(hmm, [0, 1, 2])
    with pytest.raises(ValueError, match="integers"):
        filtering(hmm, [0.5, 1.0])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        filtering(hmm, [])
    with pytest.raises(ValueError, match="horizon must be an integer >= 0"):
        predict(hmm, -1)


@pytest.mark.parametrize(
    ("history", "detail"),
    [(True, "25 bytes a step and sequence, and its beliefs"), (False, "25 ")],
    ids=["history", "last step"],
)
def test_a_prediction_past_the_machines_memory_names_the_horizon(history, detail):
    """A horizon of 10^12 raised numpy's MemoryError: its memory is checked first."""
    with pytest.raises(
        ValueError,
        match=rf"^horizon=1,000,000,000,000 needs [\d,.]+ TiB of memory \({detail}.*\); "
        r"allowed: at most this machine's [\d,.]+ [KMGT]iB$",
    ):
        predict(build_model("weather", 6), 10**12, history=history)


@pytest.mark.parametrize("backend", [lambda h: h, as_sparse], ids=["dense", "sparse"])
def test_a_batch_equals_its_members(backend):
    hmm = backend(random_hmm(7, 30, 5, zeros=0.3))
    rng = np.random.default_rng(1)
    initial = rng.dirichlet(np.ones(30), size=6)
    observations = rng.integers(-1, 5, size=(6, 12))
    batch = filtering(hmm, observations, initial=initial)
    assert isinstance(batch, FilterBatchResult)
    assert batch.beliefs.shape == (6, 12, 30) and batch.log_evidence.shape == (6,)
    for b in range(6):
        single = filtering(hmm, observations[b], initial=initial[b])
        assert isinstance(single, FilterResult)
        np.testing.assert_allclose(batch.beliefs[b], single.beliefs, rtol=1e-12, atol=1e-15)
        assert batch.log_evidence[b] == pytest.approx(single.log_evidence, rel=1e-12)
    predicted = predict(hmm, 9, initial=initial)
    for b in range(6):
        np.testing.assert_allclose(predicted[b], predict(hmm, 9, initial=initial[b]), atol=1e-15)


@pytest.mark.parametrize("steps", [1, 2, 7])
@pytest.mark.parametrize("prune", [1.0, 0.8])
def test_history_false_keeps_the_last_step_of_the_whole_history(steps, prune):
    hmm = as_sparse(random_hmm(3, 25, 4, zeros=0.3))
    rng = np.random.default_rng(2)
    initial = rng.dirichlet(np.ones(25), size=5)
    observations = rng.integers(-1, 4, size=(5, steps))
    for obs, init in ((observations, initial), (observations[0], initial[0])):
        whole = filtering(hmm, obs, initial=init, prune=prune)
        last = filtering(hmm, obs, initial=init, prune=prune, history=False)
        assert last.beliefs.shape == whole.beliefs[..., -1:, :].shape
        assert np.array_equal(last.beliefs, whole.beliefs[..., -1:, :])  # to the last bit
        np.testing.assert_array_equal(last.log_evidence, whole.log_evidence)
        np.testing.assert_array_equal(last.pruned, whole.pruned)
        assert last.elapsed.shape == (steps,)
        predicted = predict(hmm, steps - 1, initial=init, prune=prune, history=False)
        assert np.array_equal(
            predicted, predict(hmm, steps - 1, initial=init, prune=prune)[..., -1:, :]
        )
    with pytest.raises(ValueError, match="history must be True or False, got 'last'"):
        filtering(hmm, observations, history="last")


def test_batches_broadcast_and_report_zero_evidence_per_member():
    top = topp_hmm(build_model("uniform", 10), 0.5)  # symbols 5..9 impossible
    sequences = np.array([[3, 7, -1], [1, 2, 3], [8, -1, 9]])
    result = filtering(top, sequences)
    assert [z.tolist() for z in result.zero_evidence] == [[1], [], [0, 2]]
    assert np.isinf(result.log_evidence[[0, 2]]).all() and np.isfinite(result.log_evidence[1])
    initial = np.eye(10)[:4]
    shared = filtering(top, [3, -1, 4], initial=initial)
    assert shared.beliefs.shape == (4, 3, 10)
    np.testing.assert_allclose(
        shared.beliefs[2], filtering(top, [3, -1, 4], initial=initial[2]).beliefs
    )


def test_bad_initial_distributions():
    hmm = build_model("weather", 6)
    with pytest.raises(ValueError, match=r"initial must have shape \(6,\) or \(B, 6\)"):
        predict(hmm, 3, initial=np.ones(5) / 5)
    with pytest.raises(ValueError, match=r"^initial sums to 2"):
        predict(hmm, 3, initial=np.ones(6) / 3)
    with pytest.raises(ValueError, match=r"^initial row 1 sums to 0\.5"):
        predict(hmm, 3, initial=[np.ones(6) / 6, np.ones(6) / 12])


def pruned_reference(hmm, observations, p):
    """Belief pruning written out: advance, condition, keep the top-p states, renormalise."""
    T, E = toarray(hmm.transition), toarray(hmm.emission)
    beliefs, removed = [], []
    belief = hmm.prior
    for t, symbol in enumerate(observations):
        if t > 0:
            belief = belief @ T
        if symbol >= 0 and (belief * E[:, symbol]).sum() > 0:
            belief = belief * E[:, symbol] / (belief * E[:, symbol]).sum()
        kept = algorithm_1(belief, p)
        removed.append(1 - belief[kept > 0].sum())
        belief = kept
        beliefs.append(belief)
    return np.array(beliefs), np.array(removed)


@pytest.mark.parametrize("p", [0.3, 0.8, 0.99, 1.0])
@pytest.mark.parametrize("backend", [lambda h: h, as_sparse], ids=["dense", "sparse"])
def test_belief_pruning_keeps_the_top_p_states_of_every_step(p, backend):
    hmm = backend(random_hmm(11, 40, 6, zeros=0.2))
    observations = np.random.default_rng(2).integers(-1, 6, 25)
    result = filtering(hmm, observations, prune=p)
    beliefs, removed = pruned_reference(hmm, observations, p)
    np.testing.assert_allclose(result.beliefs, beliefs, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(result.pruned, removed, atol=1e-12)
    assert (result.pruned <= 1 - p + 1e-9).all()
    if p < 0.5:
        assert ((result.beliefs > 0).sum(axis=1) < 40).all()
    if p == 1.0:
        np.testing.assert_array_equal(result.pruned, 0.0)
        np.testing.assert_allclose(result.beliefs, filtering(hmm, observations).beliefs)


@pytest.mark.parametrize("prune", [0, 1.5, float("nan")])
def test_bad_pruning_mass(prune):
    with pytest.raises(ValueError, match=r"prune must be in \(0, 1\]"):
        filtering(build_model("weather", 6), [0, 1], prune=prune)


RUN_ONE_MODEL = """
import sys
import os
import subprocess
import sys

import numpy as np
import scipy.sparse as sp
from pipeline.inference import filtering
from pipeline.models import HMM

density = {"short rows": 0.02, "long rows": 0.5, "full columns": 0.8}[sys.argv[1]]
T = sp.random_array((300, 300), density=density, random_state=1, format="csr")
T = T + sp.eye_array(300, format="csr")
T = sp.csr_array(T / T.sum(axis=1)[:, None])
E = np.random.default_rng(0).dirichlet(np.ones(4), size=300)
print(filtering(HMM(np.ones(300) / 300, T, E), np.arange(10) % 4).log_evidence)
"""


def test_fresh_processes_load_the_cached_recursions_of_every_csr_layout(tmp_path):
    """Each run is a new process over one fresh numba cache, as a user's scripts are: the
    compiled recursions that hold the parallel CSR step must load from the cache and run,
    whichever layout (short rows, then long rows twice, then mostly full columns, a dense
    panel, twice) a process meets first."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    for rows in ("short rows", "long rows", "long rows", "full columns", "full columns"):
        run = subprocess.run(
            [sys.executable, "-c", RUN_ONE_MODEL, rows], env=env, capture_output=True, text=True
        )
        assert run.returncode == 0, f"{rows}: exit {run.returncode}\n{run.stderr[-2000:]}"
        assert np.isfinite(float(run.stdout))


@pytest.mark.parametrize("backend", [lambda h: h, as_sparse], ids=["dense", "sparse"])
def test_likelihoods_of_the_symbols_filter_as_the_symbols_do(backend):
    """The emission columns of the observed symbols as per-step likelihoods (ones where
    nothing was observed) give the same numbers to the last bit, one sequence and a batch,
    whole and in chunks; their logs the same to rounding."""
    hmm = backend(random_hmm(4, 20, 6, zeros=0.2))
    observations = np.random.default_rng(3).integers(-1, 6, size=(3, 15))
    E = toarray(hmm.emission)
    likelihoods = np.where(observations[..., None] >= 0, E.T[observations], 1.0)
    for member in (observations, observations[1]):
        kind = likelihoods if member.ndim == 2 else likelihoods[1]
        symbols, given = filtering(hmm, member), filtering(hmm, likelihoods=kind)
        np.testing.assert_allclose(given.beliefs, symbols.beliefs, rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(given.log_evidence, symbols.log_evidence, rtol=1e-13)
        with np.errstate(divide="ignore"):
            logged = filtering(hmm, log_likelihoods=np.log(kind))
        np.testing.assert_allclose(logged.beliefs, symbols.beliefs, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(logged.log_evidence, symbols.log_evidence, rtol=1e-12)
    whole = filtering(hmm, likelihoods=likelihoods[0])
    chunks = list(filtering_chunks(hmm, likelihoods=likelihoods[0], chunk=4))
    assert chunks[-1].log_evidence == whole.log_evidence


@pytest.mark.parametrize("tiny", [1e-322, 5e-324])
def test_tiny_emissions_keep_the_evidence_exact(tiny):
    """A symbol of probability ``tiny`` in every state, observed at every step: the evidence
    is ``T log(tiny)`` to 1e-12, never zero evidence, whole and in chunks."""
    rng = np.random.default_rng(0)
    E = np.column_stack([np.full(5, tiny), np.full(5, 1.0)])
    hmm = HMM(np.full(5, 0.2), rng.dirichlet(np.ones(5), size=5), E)
    observations = np.zeros(2000, dtype=np.int64)
    expected = 2000 * np.log(tiny)
    for result in (
        filtering(hmm, observations),
        filtering(hmm, likelihoods=np.full((2000, 5), tiny)),
        filtering(hmm, log_likelihoods=np.full((2000, 5), np.log(tiny))),
        list(filtering_chunks(hmm, observations, chunk=300))[-1],
    ):
        assert result.log_evidence == pytest.approx(expected, rel=1e-12)
    assert filtering(hmm, observations).zero_evidence.size == 0


def test_the_package_docstrings_run():
    """The examples in ``pipeline.inference`` (the Gaussian one among them) are doctests."""
    for module in (
        inference,
        inference.forward,
        inference.smoother,
        inference.sampler,
    ):
        failed, tried = doctest.testmod(module, raise_on_error=False)
        assert tried > 0 and failed == 0, module.__name__
