"""The ``file`` family: an HMM from an .npz archive, dense or sparse, and its one-line errors."""

import io

import numpy as np
import pytest
import scipy.sparse as sp
from hmmlearn.hmm import CategoricalHMM

from pipeline.inference import filtering
from pipeline.models import ParameterError
from pipeline.models import file as file_family
from pipeline.operators import toarray
from pipeline.sweep.config import register
from pipeline.sweep.main import check_overrides
from pipeline.testing.random_models import random_stochastic


@pytest.fixture
def arrays():
    """A 12-state HMM's prior, transitions (about half zeros) and emissions over 5 symbols."""
    rng = np.random.default_rng(4)
    transition = random_stochastic(rng, 12, 12, zeros=0.5)
    return random_stochastic(rng, 1, 12)[0], transition, random_stochastic(rng, 12, 5)


def test_a_dense_round_trip_gives_the_arrays_back(arrays, tmp_path):
    path = tmp_path / "hmm.npz"
    file_family.save(path, *arrays)
    assert file_family.size(path=str(path)) == 12
    file_family.check(12, path=str(path))
    hmm = file_family.build(12, path=str(path))
    for got, expected in zip((hmm.prior, hmm.transition, hmm.emission), arrays, strict=True):
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, expected)
    assert not file_family.SEEDED


@pytest.mark.parametrize("kind", ["csr", "csc", "coo", "dia", "bsr", "lil"])
def test_a_sparse_round_trip_keeps_the_matrices_sparse(arrays, tmp_path, kind):
    prior, transition, emission = arrays
    sparse = sp.csr_array(transition).asformat(kind)
    path = tmp_path / "hmm.npz"
    file_family.save(path, prior, sparse, sp.csc_array(emission), compressed=kind == "csc")
    stored = np.load(path).files
    assert "transition" not in stored and "transition_data" in stored
    hmm = file_family.build(12, path=str(path))
    assert isinstance(hmm.transition, sp.csr_array) and isinstance(hmm.emission, sp.csr_array)
    np.testing.assert_array_equal(toarray(hmm.transition), transition)
    np.testing.assert_array_equal(toarray(hmm.emission), emission)
    np.testing.assert_array_equal(hmm.prior, prior)


def test_scipy_save_npz_arrays_under_the_matrix_name_are_read(arrays, tmp_path):
    """The arrays ``scipy.sparse.save_npz`` writes (its format as bytes, its ``_is_array``),
    each prefixed with ``transition_``, make the transition matrix."""
    prior, transition, emission = arrays
    buffer = io.BytesIO()
    sp.save_npz(buffer, sp.csc_array(transition))
    buffer.seek(0)
    with np.load(buffer) as scipy_arrays:
        parts = {f"transition_{key}": scipy_arrays[key] for key in scipy_arrays.files}
    path = tmp_path / "hmm.npz"
    np.savez(path, prior=prior, emission=emission, **parts)
    np.testing.assert_array_equal(
        toarray(file_family.build(12, path=str(path)).transition), transition
    )


def test_an_hmmlearn_model_exported_in_three_lines_filters_like_hmmlearn(tmp_path):
    rng = np.random.default_rng(0)
    model = CategoricalHMM(n_components=6, n_features=4, n_iter=5, random_state=1)
    model.fit(rng.integers(0, 4, size=(300, 1)))
    path = tmp_path / "fitted.npz"
    np.savez(path, prior=model.startprob_, transition=model.transmat_, emission=model.emissionprob_)
    hmm = file_family.build(file_family.size(path=str(path)), path=str(path))
    observations = rng.integers(0, 4, size=80)
    result = filtering(hmm, observations)
    assert result.log_evidence == pytest.approx(model.score(observations.reshape(-1, 1)), rel=1e-10)


def _one_line_parameter_error(parameter, match, n_states, path):
    with pytest.raises(ParameterError, match=match) as caught:
        file_family.check(n_states, path=path)
    assert caught.value.parameter == parameter and "\n" not in str(caught.value)


def test_unusable_paths_name_the_path(arrays, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("prior, transition, emission")
    single = tmp_path / "single.npy"
    np.save(single, arrays[0])
    for path, match in (
        (None, "needs path= an .npz archive"),
        (str(tmp_path / "nowhere.npz"), r"nowhere\.npz' does not exist"),
        (str(tmp_path), "is not a regular file"),
        (str(text), r"cannot read .*notes\.txt' as an .npz archive"),
        (str(single), r"single \.npy array"),
    ):
        _one_line_parameter_error("path", match, 12, path)
    with pytest.raises(ParameterError, match="does not exist"):
        file_family.size(path=str(tmp_path / "nowhere.npz"))


def test_missing_arrays_are_named(arrays, tmp_path):
    prior, transition, emission = arrays
    cases = {
        "no_emission": ({"prior": prior, "transition": transition}, r"no array 'emission'"),
        "no_prior": ({"transition": transition, "emission": emission}, r"no array 'prior'"),
        "no_indptr": (
            {
                "prior": prior,
                "emission": emission,
                "transition_data": np.ones(3),
                "transition_indices": np.arange(3),
                "transition_shape": np.array([12, 12]),
                "transition_format": "csr",
            },
            r"stores 'transition' as csr without transition_indptr$",
        ),
        "unknown_format": (
            {
                "prior": prior,
                "emission": emission,
                "transition_data": np.ones(3),
                "transition_format": "lil",
            },
            r"stores 'transition' as 'lil'; allowed: csr, csc, bsr, coo, dia$",
        ),
        "prior_2d": (
            {"prior": prior[None], "transition": transition, "emission": emission},
            r"prior has shape \(1, 12\); it must be \(n_states,\)$",
        ),
    }
    for name, (stored, match) in cases.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, **stored)
        _one_line_parameter_error("path", match, 12, str(path))


def test_another_size_names_n_states(arrays, tmp_path):
    path = tmp_path / "hmm.npz"
    file_family.save(path, *arrays)
    _one_line_parameter_error("n_states", r"holds an HMM of 12 states, not n_states=13$", 13, path)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda t, e: (t[:, :11], e), r"hmm\.npz': transition has shape \(12, 11\); with a prior"),
        (lambda t, e: (t * 0.9, e), r"hmm\.npz': transition row 0 sums to 0\.9"),
        (lambda t, e: (t, np.where(e == e.max(), -e, e)), r"hmm\.npz': emission\[\d+, \d+\] = -"),
    ],
)
@pytest.mark.parametrize("sparse", [False, True])
def test_the_containers_validation_reaches_the_user_as_it_is(
    arrays, tmp_path, change, match, sparse
):
    prior, transition, emission = arrays
    transition, emission = change(transition, emission)
    if sparse:
        transition, emission = sp.csc_array(transition), sp.coo_array(emission)
    path = tmp_path / "hmm.npz"
    file_family.save(path, prior, transition, emission)
    with pytest.raises(ParameterError, match=match) as caught:
        file_family.build(12, path=str(path))
    assert caught.value.parameter == "path" and "\n" not in str(caught.value)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_low_precision_file_is_read_as_its_float64_cast(arrays, tmp_path, dtype):
    """Arrays normalised in float32 or float16 were refused through ``experiment=file``
    ("prior sums to 1.0000000149; it must sum to 1 within 1e-09"): they are read as the
    float64 model of their rows, each divided by its sum, and the sweep accepts the file."""
    given = [a.astype(dtype) for a in arrays]
    given = [a / a.sum(axis=-1, keepdims=True) for a in given]
    path = tmp_path / "hmm.npz"
    file_family.save(path, *given)
    hmm = file_family.build(12, path=str(path))
    for got, low in zip((hmm.prior, hmm.transition, hmm.emission), given, strict=True):
        cast = low.astype(np.float64)
        np.testing.assert_array_equal(got, cast / cast.sum(axis=-1, keepdims=True))
    register()
    store = tmp_path / "s.zarr"
    assert check_overrides(["experiment=file", f"model.file.path={path}", f"store={store}"]) is None


def test_a_low_precision_row_off_by_more_than_its_rounding_is_named_with_its_dtype(
    arrays, tmp_path
):
    prior, transition, emission = (a.astype(np.float32) for a in arrays)
    transition[3] *= np.float32(1.001)
    path = tmp_path / "hmm.npz"
    file_family.save(path, prior, transition, emission)
    register()
    store = tmp_path / "s.zarr"
    problem = check_overrides(["experiment=file", f"model.file.path={path}", f"store={store}"])
    assert problem.startswith(
        f"methods.model.file.path: {str(path)!r}: transition row 3 sums to 1.001"
    )
    assert problem.endswith(
        "; 12 float32 entries must sum to 1 within 4.13e-07 (float32's eps times the square "
        "root of 12)"
    )
