"""A learning problem: training and held-out sequences drawn from a generating model, and the
model EM starts from, all deterministic in one seed.

The start model is a perturbation of the truth, not a model of the same family drawn with
another seed: every row of the prior, the transitions and the emissions is the truth's row
mixed with a random one,

    start_i = (1 - noise) truth_i + noise r_i,    r_i ~ Dirichlet(1, ..., 1),

for three reasons. A state of the start model is then the truth's state of the same index,
so the fitted parameters' distance to the truth (``compare``) is measured without matching
states, which EM from an unrelated start would leave permuted. The word-bigram family has
no randomness (every seed gives the same model), so another seed would start EM at the
truth. And every entry of the start is positive: EM can move mass to any entry, and the
only zeros an E-step sees are those its approximation makes; the LM's identity emissions
become noisy, so its states are hidden, not read off the words.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference import sample
from pipeline.operators import rows

TRAINING, HELD_OUT, START = 0, 1, 2
"""Streams mixed into ``seed`` so that the three draws are independent of one another."""


class Problem(NamedTuple):
    """What one EM run learns from and starts at.

    training : ndarray of int64, shape (sequences, length)
        Symbols drawn from the generating model, one row per sequence.
    held_out : ndarray of int64, shape (held_out, length)
        More sequences drawn from it, independently, which EM does not see.
    start : HMM
        The model every EM run of the problem starts from: dense prior (n_states,),
        transition (n_states, n_states) and emission (n_states, n_observations), every entry
        positive.
    """

    training: np.ndarray
    held_out: np.ndarray
    start: HMM


def _check_count(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _check_noise(noise) -> None:
    if isinstance(noise, bool) or not isinstance(noise, int | float | np.floating):
        raise ValueError(f"noise must be a number in (0, 1], got {noise!r}")
    if not 0 < noise <= 1:
        raise ValueError(f"noise must be a number in (0, 1], got {noise!r}")


def _perturbed(matrix, noise: float, rng: np.random.Generator) -> np.ndarray:
    """``(1 - noise) matrix + noise R`` as a dense array (n, m), ``R``'s rows Dirichlet(1)."""
    n, m = matrix.shape
    return (1.0 - noise) * rows(matrix, 0, n) + noise * rng.dirichlet(np.ones(m), n)


def draw(
    truth: HMM, *, sequences: int, length: int, held_out: int, seed: int, noise: float = 0.5
) -> Problem:
    """Training and held-out sequences drawn from ``truth`` and the start model (module
    docstring), each from its own stream of ``seed``: the same arguments give the same
    ``Problem``.

    Parameters
    ----------
    truth : HMM
        The generating model, any matrix format.
    sequences, held_out : int >= 1
        How many training and held-out sequences to draw.
    length : int >= 1
        The steps of each sequence.
    seed : int
        Seeds the three draws (``TRAINING``, ``HELD_OUT``, ``START``).
    noise : float in (0, 1]
        The weight of the random rows in the start model; 1 starts from a random model.

    The start model is dense: ``8 n (1 + n + m)`` bytes, 400 MB at 5,000 states and symbols.
    ``ValueError`` in one line names an argument out of its range.

    >>> from pipeline.models import build_model
    >>> problem = draw(build_model("bell", 8), sequences=3, length=5, held_out=2, seed=0)
    >>> problem.training.shape, problem.held_out.shape, problem.start.transition.shape
    ((3, 5), (2, 5), (8, 8))
    """
    for name, value in (("sequences", sequences), ("length", length), ("held_out", held_out)):
        _check_count(name, value)
    _check_noise(noise)
    training = sample(truth, length - 1, seed=[seed, TRAINING], n_sequences=sequences)
    testing = sample(truth, length - 1, seed=[seed, HELD_OUT], n_sequences=held_out)
    rng = np.random.default_rng([seed, START])
    start = HMM(
        _perturbed(truth.prior[None, :], noise, rng)[0],
        _perturbed(truth.transition, noise, rng),
        _perturbed(truth.emission, noise, rng),
    )
    return Problem(np.atleast_2d(training.observations), np.atleast_2d(testing.observations), start)
