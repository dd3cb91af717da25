"""The learning problem: deterministic in its seed, three independent draws, a start model
that mixes the truth's rows with random ones whatever the truth's format, one-line refusals."""

import numpy as np
import pytest

from pipeline.learning.problem import draw
from pipeline.models import build_model
from pipeline.operators import toarray
from pipeline.testing.random_models import random_hmm


def test_the_same_seed_draws_the_same_problem_and_each_draw_its_own_stream():
    truth = build_model("bell", 8, seed=3)
    one = draw(truth, sequences=3, length=6, held_out=2, seed=5)
    again = draw(truth, sequences=3, length=6, held_out=2, seed=5)
    more = draw(truth, sequences=3, length=6, held_out=4, seed=5, noise=0.2)
    other = draw(truth, sequences=3, length=6, held_out=2, seed=6)
    for name in ("training", "held_out"):
        np.testing.assert_array_equal(getattr(one, name), getattr(again, name))
    np.testing.assert_array_equal(one.start.transition, again.start.transition)
    np.testing.assert_array_equal(more.training, one.training)  # apart from the held-out draw
    assert not np.array_equal(other.training, one.training)
    assert one.training.shape == (3, 6) and one.held_out.shape == (2, 6)
    assert one.training.dtype == np.int64 and 0 <= one.training.min() <= one.training.max() < 8


def test_the_start_mixes_the_truth_with_random_rows_in_every_format():
    dense = build_model("bell", 9, seed=1)
    structured = build_model("bell", 9, seed=1, structured=True)
    half = draw(dense, sequences=1, length=4, held_out=1, seed=2)
    same = draw(structured, sequences=1, length=4, held_out=1, seed=2)
    for name in ("prior", "transition", "emission"):
        start = getattr(half.start, name)
        assert isinstance(start, np.ndarray) and (start > 0).all()
        np.testing.assert_allclose(start, getattr(same.start, name), rtol=0, atol=1e-15)
        np.testing.assert_allclose(np.atleast_2d(start).sum(axis=-1), 1.0, atol=1e-12)
        truth = np.atleast_2d(toarray(np.atleast_2d(getattr(dense, name))))
        assert (np.atleast_2d(start) >= 0.5 * truth - 1e-15).all()  # half the truth in each row
    unrelated = random_hmm(4, 9, 9)
    random_start = draw(dense, sequences=1, length=4, held_out=1, seed=2, noise=1.0).start
    np.testing.assert_allclose(  # noise 1: the truth plays no part
        random_start.transition,
        draw(unrelated, sequences=1, length=4, held_out=1, seed=2, noise=1.0).start.transition,
        rtol=0,
        atol=1e-15,
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sequences": 0}, r"^sequences must be an integer >= 1, got 0$"),
        ({"length": 2.0}, r"^length must be an integer >= 1, got 2\.0$"),
        ({"held_out": True}, r"^held_out must be an integer >= 1, got True$"),
        ({"noise": 0}, r"^noise must be a number in \(0, 1\], got 0$"),
        ({"noise": 1.5}, r"^noise must be a number in \(0, 1\], got 1\.5$"),
        ({"noise": "half"}, r"^noise must be a number in \(0, 1\], got 'half'$"),
    ],
)
def test_bad_arguments_are_refused_in_one_line(change, message):
    arguments = {"sequences": 2, "length": 3, "held_out": 1, "seed": 0, **change}
    with pytest.raises(ValueError, match=message):
        draw(build_model("bell", 6), **arguments)
