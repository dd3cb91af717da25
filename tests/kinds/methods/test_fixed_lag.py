"""Fixed-lag smoothing, ``P(S_t | o_0..o_{t+L})``: against every state path of tiny models,
against smoothing and filtering at its two ends, against dynamax, as a sweep cell and in the
report."""

import numpy as np
import pytest
from inference import brute_force
from matplotlib.image import imread

from pipeline.hmm import HMM
from pipeline.inference import filtering, smoothing
from pipeline.kinds.methods import tasks, timed
from pipeline.kinds.methods.grid import MethodsGrid
from pipeline.kinds.methods.modes import lookup
from pipeline.kinds.methods.modes.fixed_lag import fixed_lag_smoothing
from pipeline.kinds.methods.records import ModelSpec
from pipeline.kinds.methods.report import KIT, report
from pipeline.kinds.methods.results import SCHEMA
from pipeline.methods import approximate
from pipeline.metrics import total_variation
from pipeline.models import build_model
from pipeline.operators import toarray
from pipeline.sweep.layout import template
from pipeline.sweep.timing import Timing
from pipeline.testing.random_models import random_hmm, random_stochastic

from sweeping import composed


def _windowed(prior, T, logs, lag):
    """``P(S_t | o_0..o_{t+lag})`` of every step by enumerating every path of each prefix."""
    steps = logs.shape[0]
    found = []
    for t in range(steps):
        stop = min(t + lag, steps - 1) + 1
        moves = T if np.ndim(T) == 2 else T[: stop - 1]
        found.append(brute_force.smoothing(prior, moves, logs[:stop])[0][t])
    return np.array(found)


@pytest.mark.parametrize("seed", range(4))
def test_every_lag_against_every_path(seed):
    """Random tiny models with sparse rows, some steps unobserved, every lag from 0 past the
    horizon: each posterior and the evidence to 1e-12."""
    rng = np.random.default_rng(seed)
    hmm = random_hmm(seed, 3, 4, zeros=0.3)
    observed = rng.integers(-1, 4, 6)
    logs = brute_force.symbol_log_likelihoods(hmm.emission, observed)
    _, evidence, _ = brute_force.smoothing(hmm.prior, hmm.transition, logs)
    for lag in range(8):
        found = fixed_lag_smoothing(hmm, observed, lag=lag)
        expected = _windowed(hmm.prior, hmm.transition, logs, lag)
        np.testing.assert_allclose(found.posteriors, expected, rtol=0, atol=1e-12, err_msg=lag)
        assert found.log_evidence == pytest.approx(evidence, rel=1e-12)


def test_transitions_that_change_with_time_against_every_path():
    rng = np.random.default_rng(7)
    hmm = random_hmm(7, 3, 2)
    moves = np.stack([random_stochastic(rng, 3, 3, zeros=0.2) for _ in range(5)])
    observed = np.array([0, 1, -1, 1, 0, 0])
    logs = brute_force.symbol_log_likelihoods(hmm.emission, observed)
    for lag in (0, 2, 5):
        found = fixed_lag_smoothing(hmm, observed, lag=lag, transitions=moves)
        expected = _windowed(hmm.prior, moves, logs, lag)
        np.testing.assert_allclose(found.posteriors, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["topp", "lowrank"])
def test_its_two_ends_are_filtering_and_smoothing_in_every_format(method):
    """Lag 0 is filtering and a lag of the horizon or more smoothing, to the last bit; in
    between each step is smoothing's of the sequence cut after step t + L, in the CSR and
    the low-rank format alike."""
    hmm = approximate(build_model("bell", 12), method, 0.8 if method == "topp" else 3).hmm
    observed = tasks.observations(hmm, mode="filter", horizon=9, observe_every=2, seed=1)[1]
    np.testing.assert_array_equal(
        fixed_lag_smoothing(hmm, observed, lag=0).posteriors, filtering(hmm, observed).beliefs
    )
    whole = smoothing(hmm, observed).posteriors
    for lag in (9, 30):
        np.testing.assert_array_equal(fixed_lag_smoothing(hmm, observed, lag=lag).posteriors, whole)
    found = fixed_lag_smoothing(hmm, observed, lag=3).posteriors
    for t in range(10):
        cut = smoothing(hmm, observed[: min(t + 3, 9) + 1]).posteriors[t]
        np.testing.assert_array_equal(found[t], cut)
    dense = HMM(hmm.prior, toarray(hmm.transition), toarray(hmm.emission))
    np.testing.assert_allclose(fixed_lag_smoothing(dense, observed, lag=3).posteriors, found)


def test_an_impossible_observation_counts_as_unobserved():
    """As in smoothing: the step keeps its prediction, is listed, the evidence is -inf."""
    hmm = HMM(np.array([1.0, 0.0]), np.array([[0.5, 0.5], [0.0, 1.0]]), np.eye(2))
    observed = np.array([1, 0, 1, 1])  # state 1 cannot be observed at step 0
    found = fixed_lag_smoothing(hmm, observed, lag=1)
    assert found.log_evidence == -np.inf and found.zero_evidence.tolist() == [0]
    for t in range(4):
        cut = smoothing(hmm, observed[: min(t + 1, 3) + 1]).posteriors[t]
        np.testing.assert_array_equal(found.posteriors[t], cut)


def test_a_bad_lag_is_named():
    hmm = random_hmm(0, 3, 2)
    for lag in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="lag must be an integer >= 0"):
            fixed_lag_smoothing(hmm, [0, 1], lag=lag)
    with pytest.raises(ValueError, match="one sequence"):
        fixed_lag_smoothing(hmm, [[0, 1], [1, 0]], lag=1)


@pytest.mark.dynamax
@pytest.mark.parametrize("lag", [1, 4])
def test_against_dynamax(lag):
    """dynamax's ``smoothed_probs[s, w]`` is ``P(z_{s - window + 1 + w} | y_0..y_s)``: with a
    window of ``lag + 1`` steps, ``[t + lag, 0]`` is step t's posterior at lag ``lag``."""
    import jax
    import jax.numpy as jnp
    from dynamax.hidden_markov_model import inference

    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(3)
    hmm = HMM(rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5), size=5), np.ones((5, 1)))
    logs = -0.5 * (rng.normal(0, 3, (40, 1)) - rng.normal(0, 3, 5)) ** 2  # Gaussian, sigma 1
    expected = inference.hmm_fixed_lag_smoother(
        jnp.asarray(hmm.prior), jnp.asarray(hmm.transition), jnp.asarray(logs), lag + 1
    )
    found = fixed_lag_smoothing(hmm, log_likelihoods=logs, lag=lag).posteriors
    windowed = np.asarray(expected.smoothed_probs)[lag:, 0]
    np.testing.assert_allclose(found[: 40 - lag], windowed, rtol=1e-9, atol=1e-12)


TINY = ModelSpec("dirichlet", 3, 0, {"alpha": 0.5, "n_observations": 3})
"""3 states, 3 symbols: few enough paths to enumerate over 7 steps."""


def test_a_cell_holds_the_approximate_posteriors_against_the_exact_ones():
    """The stored TV of a ``fixed_lag_2`` cell from the enumeration of every path of the
    exact and the approximate model, on filter's observations."""
    model = tasks.build(TINY)
    built = tasks.build_approximation(model, method="topp", setting=0.6)
    mixed = tasks.mixing(model, exact=True)
    exact = tasks.reference(model, mode="fixed_lag_2", horizon=6, observe_every=1, seed=0, run=True)
    filtered = tasks.reference(model, mode="filter", horizon=6, observe_every=1, seed=0, run=True)
    np.testing.assert_array_equal(exact.observations, filtered.observations)
    timing = Timing(repeats=2, min_seconds=0.0, max_repeats=2, threads=1)
    which = ("topp", 0.6)
    runs = timed.timed_runs(model, exact, built, which=(which,), mode="fixed_lag_2", timing=timing)
    cell = tasks.run_cell(
        model, built, exact, mixed, runs, which=which, mode="fixed_lag_2", timing=timing
    )

    def posteriors(hmm):
        logs = brute_force.symbol_log_likelihoods(toarray(hmm.emission), exact.observations)
        return _windowed(hmm.prior, toarray(hmm.transition), logs, 2)

    tv = total_variation(posteriors(model.hmm), posteriors(built.approximation.hmm))
    np.testing.assert_allclose(cell.tv, tv, rtol=0, atol=1e-12)
    assert cell.tv_max == pytest.approx(tv.max(), abs=1e-12) and tv.max() > 0.01
    assert cell.repeats == 2 and np.isfinite(cell.speedup)
    assert np.isnan(cell.certificate).all() and np.isnan(cell.work)


def test_the_report_shows_each_approximation_at_each_lag(tmp_path):
    grid = MethodsGrid.from_config(
        composed(
            "grid.families=[bell]",
            "grid.n_states=[20]",
            "grid.methods={topp:[0.5,0.9],topp_states:[0.9]}",
            "grid.seeds=[0,1]",
            "grid.modes=[filter,fixed_lag_0,fixed_lag_3]",
        )
    )
    ds, _ = template(SCHEMA, grid, {})
    ds["done"] = ds["done"] | ds["in_grid"]
    rough, fine = {"method": "topp", "setting": 0.5}, {"method": "topp", "setting": 0.9}
    for where, (short, long) in ((rough, (0.4, 0.2)), (fine, (0.04, 0.02))):
        ds["tv_max"].loc[{**where, "mode": "fixed_lag_0"}] = short
        ds["tv_max"].loc[{**where, "mode": "fixed_lag_3"}] = long
    text = report(ds, tmp_path / "results.zarr", ["fixed_lag.png"])
    assert "## Fixed-lag smoothing" in text and "![fixed_lag.png](fixed_lag.png)" in text
    assert "| model | method | lag 0 | lag 3 |" in text
    assert "| bell, n=20 | top-p 0.5 | 0.4 | 0.2 |" in text
    assert "| bell, n=20 | top-p states 0.9 |" not in text  # no run: no row
    (figure,) = lookup("fixed_lag_3").figures(ds, KIT).values()
    figure.savefig(tmp_path / "fixed_lag.png")
    image = imread(tmp_path / "fixed_lag.png")
    assert image.shape[1] > 400 and np.ptp(image[..., :3]) > 0.5
    assert lookup("fixed_lag_3").title == "fixed-lag smoothing (lag 3)"
