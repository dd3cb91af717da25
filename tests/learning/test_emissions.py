"""The emission models: Gaussian's weighted moments and variance floor against their
formulas, and an emission model outside the package learnt through the M-step hook."""

import numpy as np
import pytest
from scipy.special import gammaln

from pipeline.learning import Emission, Gaussian, fit
from pipeline.learning.emissions import gaussian_moments
from pipeline.testing.random_models import random_hmm


def test_gaussian_moments_are_the_posterior_weighted_mean_and_variance():
    rng = np.random.default_rng(1)
    y = rng.normal(0, 2, 40)
    posteriors = np.zeros((40, 3))  # state 2: no weight
    posteriors[:, 0] = 1.0
    posteriors[7] = [0.4, 0.6, 0.0]  # state 1: all its weight on y[7]
    means, variances = gaussian_moments(
        np.array([9.0, 9.0, 9.0]), np.array([4.0, 4.0, 4.0]), y, posteriors, 0.05
    )
    weights = posteriors[:, 0]
    mean = (weights * y).sum() / weights.sum()
    assert means[0] == pytest.approx(mean, rel=1e-12)
    assert variances[0] == pytest.approx((weights * (y - mean) ** 2).sum() / weights.sum())
    assert (means[1], variances[1]) == (pytest.approx(y[7]), 0.05)  # collapsed: the floor
    assert (means[2], variances[2]) == (9.0, 4.0)  # no weight: kept


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (([0.0, 1.0], [1.0]), r"^means and variances must be 1-D of one length"),
        (([0.0, 1.0], [1.0, 0.0]), r"^means must be finite and variances finite and > 0"),
        (([0.0, np.nan], [1.0, 1.0]), r"^means must be finite"),
        (([0.0], [1.0], 0.0), r"^variance_floor must be a number > 0, got 0\.0"),
    ],
)
def test_a_bad_gaussian_is_refused_in_one_line(arguments, message):
    with pytest.raises(ValueError, match=message):
        Gaussian(*arguments)


class Poisson(Emission):
    """Counts, one Poisson rate per state: a model the package does not know."""

    def __init__(self, rates):
        self.rates = np.asarray(rates, dtype=np.float64)

    def read(self, sequence, name):
        sequence = np.asarray(sequence)
        if sequence.ndim != 1 or sequence.dtype.kind not in "iu" or (sequence < 0).any():
            raise ValueError(f"{name} must be counts >= 0")
        return sequence

    def log_likelihoods(self, observations):
        k = observations[:, None]
        return k * np.log(self.rates) - self.rates - gammaln(k + 1)

    def m_step(self, observations, posteriors):
        return Poisson(posteriors.T @ observations / posteriors.sum(axis=0))


def test_an_emission_model_of_its_own_is_learnt_through_the_hook():
    rng = np.random.default_rng(2)
    sequences = [rng.poisson(rng.choice([1.0, 8.0]), size) for size in (30, 20, 30)]
    start = random_hmm(3, 2, 1)
    fitted = fit(start, sequences, emission=Poisson([2.0, 5.0]), iterations=20, tolerance=0.0)
    history = fitted.history.log_likelihood
    assert (np.diff(history) >= -1e-9).all() and history[-1] > history[0] + 1
    assert isinstance(fitted.emission, Poisson)
    assert sorted(fitted.emission.rates.round()) == pytest.approx([1.0, 8.0], abs=1.0)
    assert fitted.hmm.emission.shape == (2, 1)  # a placeholder: the model is fitted.emission
    with pytest.raises(ValueError, match=r"^observations\[1\] must be counts >= 0"):
        fit(start, [[1, 2], [3, -1]], emission=Poisson([2.0, 5.0]))


def test_an_emission_model_without_its_m_step_cannot_be_made():
    class Partial(Emission):
        def log_likelihoods(self, observations):
            return np.zeros((len(observations), 2))

    with pytest.raises(TypeError, match="m_step"):
        Partial()
