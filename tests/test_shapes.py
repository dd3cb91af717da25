"""The shapes the public API's signatures name (``pipeline.shapes``) agree with what the
functions return."""

import typing

import numpy as np

from pipeline import shapes
from pipeline.hmm import HMM
from pipeline.inference import (
    FilterBatchResult,
    FilterResult,
    Sample,
    SampleBatch,
    SmoothBatchResult,
    SmoothResult,
    ViterbiBatchResult,
    ViterbiResult,
    filtering,
    predict,
    sample,
    smoothing,
    viterbi,
)


def declared(result) -> dict[str, str]:
    """Each field of ``result`` (a NamedTuple) that names a shape -> the shape."""
    hints = typing.get_type_hints(type(result), include_extras=True)
    return {
        name: hint.__metadata__[0]
        for name, hint in hints.items()
        if typing.get_origin(hint) is typing.Annotated
    }


def check(result, sizes: dict[str, int]) -> None:
    """Every field with a declared shape has that shape, its letters read from ``sizes``."""
    fields = declared(result)
    assert fields, type(result).__name__
    for name, shape in fields.items():
        letters = shape.strip("()").replace(" ", "").split(",")
        expected = tuple(sizes[letter] for letter in letters if letter)
        assert np.shape(getattr(result, name)) == expected, (type(result).__name__, name)


def test_every_alias_is_an_ndarray_with_its_shape():
    aliases = {
        name: value
        for name, value in vars(shapes).items()
        if typing.get_origin(value) is typing.Annotated
    }
    assert {"Vector", "Beliefs", "BatchBeliefs", "Observations", "StatePath"} <= set(aliases)
    for name, alias in aliases.items():
        assert typing.get_args(alias)[0] is np.ndarray, name
        assert alias.__metadata__[0].startswith("("), name


def test_results_have_the_shapes_their_fields_declare():
    hmm = HMM(
        np.array([0.6, 0.3, 0.1]),
        np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4]]),
        np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8]]),
    )
    assert typing.get_type_hints(HMM, include_extras=True)["prior"] is shapes.Vector
    one, batch = [0, 1, -1, 1], [[0, 1, -1, 1], [1, 1, 0, 0]]
    sizes = {"T": 4, "B": 2, "n_states": 3, "k": 0}
    for result, kind in [
        (filtering(hmm, one), FilterResult),
        (filtering(hmm, batch), FilterBatchResult),
        (smoothing(hmm, one), SmoothResult),
        (smoothing(hmm, batch), SmoothBatchResult),
        (viterbi(hmm, one), ViterbiResult),
        (viterbi(hmm, batch), ViterbiBatchResult),
        (sample(hmm, 3, seed=0), Sample),
        (sample(hmm, 3, seed=0, n_sequences=2), SampleBatch),
    ]:
        assert isinstance(result, kind)
        check(result, sizes)
    assert predict(hmm, 3).shape == (4, 3)
