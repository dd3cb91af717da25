import itertools
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from pipeline.corpus import read_documents, tokenize, vocabulary
from pipeline.hmmlm import saved
from pipeline.hmmlm.parameters import initial
from pipeline.inference import filtering, smoothing
from pipeline.models import (
    HMM,
    ParameterError,
    build_model,
    check_model,
    dirichlet,
    family_parameters,
    seeded,
)
from pipeline.models.weather import STATES
from pipeline.operators import toarray
from pipeline.testing.random_models import random_stochastic


def small_hmm(**overrides):
    arrays = dict(
        prior=[0.5, 0.5], transition=[[0.9, 0.1], [0.2, 0.8]], emission=[[0.7, 0.3], [0.4, 0.6]]
    )
    arrays.update(overrides)
    return HMM(
        **{k: v if sp.issparse(v) else np.asarray(v, dtype=float) for k, v in arrays.items()}
    )


class TestHMMValidation:
    def test_valid_dense_and_sparse(self):
        hmm = small_hmm()
        assert (hmm.n_states, hmm.n_observations) == (2, 2)
        assert isinstance(hmm.transition, np.ndarray)
        sparse = HMM(hmm.prior, sp.csr_matrix(hmm.transition), sp.coo_array(hmm.emission))
        assert isinstance(sparse.transition, sp.csr_array)
        assert isinstance(sparse.emission, sp.csr_array)

    def test_row_sum_names_array_row_and_sum(self):
        with pytest.raises(ValueError, match=r"transition row 1 sums to 0\.9\b"):
            small_hmm(transition=[[0.9, 0.1], [0.2, 0.7]])
        with pytest.raises(ValueError, match=r"^prior sums to 1\.1"):
            small_hmm(prior=[0.6, 0.5])
        bad = sp.csr_array(np.array([[0.7, 0.3], [0.5, 0.4]]))
        with pytest.raises(ValueError, match=r"emission row 1 sums to 0\.9"):
            small_hmm(emission=bad)

    def test_within_tolerance_is_accepted(self):
        small_hmm(transition=[[0.9 + 5e-10, 0.1], [0.2, 0.8]])
        with pytest.raises(ValueError, match="within 1e-09"):
            small_hmm(transition=[[0.9 + 5e-9, 0.1], [0.2, 0.8]])

    @pytest.mark.parametrize(
        "dtype, sparse", [(np.float32, False), (np.float32, True), (np.float16, False)]
    )
    def test_low_precision_is_read_as_its_float64_cast(self, dtype, sparse):
        """A model normalised in float32 or float16 was refused ("prior sums to 1.0000000149;
        it must sum to 1 within 1e-09"): it is now the float64 model of its rows, each
        divided by its sum, and inference on it gives that model's answers."""
        rng = np.random.default_rng(7)
        given = [
            random_stochastic(rng, 1, 40)[0],
            random_stochastic(rng, 40, 40, zeros=0.3),
            random_stochastic(rng, 40, 6),
        ]
        given = [(a / a.sum(axis=-1, keepdims=True)).astype(dtype) for a in given]
        given = [a / a.sum(axis=-1, keepdims=True) for a in given]  # normalised in dtype
        assert max(np.abs(a.sum(axis=-1, dtype=np.float64) - 1).max() for a in given) > 1e-9
        cast = [
            a.astype(np.float64) / a.sum(axis=-1, keepdims=True, dtype=np.float64) for a in given
        ]
        stored = sp.csr_array if sparse else np.asarray
        hmm = HMM(given[0], stored(given[1]), given[2])
        reference = HMM(cast[0], stored(cast[1]), cast[2])
        for got, expected in zip((hmm.prior, hmm.transition, hmm.emission), cast, strict=True):
            assert got.dtype == np.float64
            np.testing.assert_array_equal(toarray(got) if sparse else got, expected)
        observations = rng.integers(-1, 6, size=30)
        filtered, smoothed = filtering(hmm, observations), smoothing(hmm, observations)
        np.testing.assert_array_equal(filtered.beliefs, filtering(reference, observations).beliefs)
        np.testing.assert_allclose(
            smoothed.posteriors, smoothing(reference, observations).posteriors, rtol=1e-12
        )
        assert smoothed.log_evidence == pytest.approx(filtered.log_evidence, rel=1e-12)

    def test_a_low_precision_row_off_by_more_than_its_rounding_names_the_dtype(self):
        T = np.array([[0.9, 0.1], [0.2, 0.8]], dtype=np.float32)
        T[1] *= np.float32(1 + 1e-4)  # 840 times float32's eps
        with pytest.raises(
            ValueError,
            match=r"^transition row 1 sums to 1\.0001\d*; 2 float32 entries must sum to 1 within "
            r"1\.69e-07 \(float32's eps times the square root of 2\)$",
        ):
            HMM(np.full(2, 0.5, np.float32), T, np.eye(2, dtype=np.float32))

    @pytest.mark.parametrize("value", [np.nan, np.inf, -0.1])
    def test_bad_entries_name_position(self, value):
        with pytest.raises(ValueError, match=r"emission\[1, 0\] = .*finite and non-negative"):
            small_hmm(emission=[[0.7, 0.3], [value, 0.6]])
        sparse = sp.csr_array(np.array([[0.7, 0.3], [value, 0.6]]))
        with pytest.raises(ValueError, match=r"emission\[1, 0\]"):
            small_hmm(emission=sparse)

    def test_shapes(self):
        with pytest.raises(ValueError, match=r"transition has shape \(2, 3\)"):
            small_hmm(transition=[[0.9, 0.1, 0.0], [0.2, 0.8, 0.0]])
        with pytest.raises(ValueError, match=r"emission has shape \(3, 2\)"):
            small_hmm(emission=[[0.7, 0.3], [0.4, 0.6], [0.5, 0.5]])
        with pytest.raises(ValueError, match="prior must be a non-empty 1-D"):
            small_hmm(prior=[[0.5, 0.5]])
        with pytest.raises(TypeError, match="prior must be a dense"):
            HMM(sp.csr_array(np.array([[0.5, 0.5]])), np.eye(2), np.eye(2))


class TestWeather:
    def test_table_1_transposed(self):
        hmm = build_model("weather", 6)
        sunny = STATES.index("sunny")
        np.testing.assert_array_equal(hmm.transition[sunny], [0.3, 0.25, 0.15, 0.2, 0.06, 0.04])
        # Table 1, column "heavy rain" (current) is our row "heavy rain".
        np.testing.assert_array_equal(hmm.transition[4], [0.1, 0.2, 0.1, 0.1, 0.2, 0.3])
        np.testing.assert_allclose(hmm.prior, np.full(6, 1 / 6))

    def test_raincoat_probability(self):
        hmm = build_model("weather", 6)
        assert hmm.emission[STATES.index("sunny"), 1] == pytest.approx(0.35)
        np.testing.assert_allclose(hmm.emission[:, 1], [0.4, 0.6, 0.4, 0.35, 0.7, 0.7])

    def test_only_six_states(self):
        with pytest.raises(ValueError, match="exactly 6 states"):
            build_model("weather", 7)


class TestSyntheticFamilies:
    def test_uniform(self):
        hmm = build_model("uniform", 10)
        assert np.all(hmm.transition == 0.1) and np.all(hmm.emission == 0.1)

    def test_bell_rows(self):
        n = 40
        hmm = build_model("bell", n, seed=5)
        for row in hmm.transition:
            big = np.flatnonzero(row > 0.1 / (n - 5) + 1e-15)
            assert big.size == 5
            centre = big[np.argmax(row[big])]
            window = (centre + np.arange(-2, 3)) % n
            np.testing.assert_allclose(row[window], 0.9 * np.array([1, 4, 6, 4, 1]) / 16)
            assert row.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(hmm.emission[7, 5:10], 0.9 * np.array([1, 4, 6, 4, 1]) / 16)

    def test_bell_seeds(self):
        a, b, c = (build_model("bell", 30, seed=s).transition for s in (1, 1, 2))
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)
        with pytest.raises(ValueError, match="n_states >= 6"):
            build_model("bell", 5)

    def test_dirichlet_seeds_and_alpha(self):
        a = build_model("dirichlet", 30, seed=1, alpha=0.05)
        np.testing.assert_array_equal(
            a.transition, build_model("dirichlet", 30, seed=1, alpha=0.05).transition
        )
        assert not np.array_equal(
            a.transition, build_model("dirichlet", 30, seed=2, alpha=0.05).transition
        )
        peaked = np.sort(a.transition, axis=1)[:, -1].mean()
        flat = np.sort(build_model("dirichlet", 30, seed=1, alpha=10).transition, axis=1)[:, -1]
        assert peaked > 2 * flat.mean()
        assert build_model("dirichlet", 30, n_observations=4).emission.shape == (30, 4)

    def test_dirichlet_blocks_regenerate_the_same_rows(self):
        full = dirichlet.dirichlet_rows(3, dirichlet.TRANSITION, 0, 3000, 700, 0.2)
        block = dirichlet.dirichlet_rows(3, dirichlet.TRANSITION, 1490, 1600, 700, 0.2)
        np.testing.assert_array_equal(block, full[1490:1600])
        first = dirichlet.dirichlet_rows(3, dirichlet.TRANSITION, 0, 5, 700, 0.2)
        np.testing.assert_array_equal(first, full[:5])
        peaked = dirichlet.dirichlet_rows(3, dirichlet.TRANSITION, 0, 3000, 50, 0.01)
        np.testing.assert_array_equal(
            dirichlet.dirichlet_rows(3, dirichlet.TRANSITION, 7, 9, 50, 0.01), peaked[7:9]
        )


class TestLM:
    TEXT = "the cat sat. the cat ran! a dog sat; the end"

    @pytest.fixture
    def corpus(self, tmp_path):
        path = tmp_path / "corpus.txt"
        path.write_text(self.TEXT)
        return path

    def test_brute_force_bigrams(self, corpus):
        # Word counts: the 3, cat 2, sat 2, ran 1, a 1, dog 1, end 1.
        hmm = build_model("lm", 4, corpus=str(corpus), alpha=0.5)
        words = vocabulary(read_documents(corpus), 4)
        assert words == ("the", "cat", "sat", "<unk>")
        tokens = [w if w in words else "<unk>" for w in tokenize(self.TEXT)]
        pairs = list(itertools.pairwise(tokens))
        for i, a in enumerate(words):
            out = [q for q in pairs if q[0] == a]
            for j, b in enumerate(words):
                expected = Fraction(sum(q[1] == b for q in out)) + Fraction(1, 2)
                expected /= len(out) + Fraction(1, 2) * 4
                assert hmm.transition[i, j] == pytest.approx(float(expected), abs=1e-15)
        np.testing.assert_allclose(hmm.prior, [3 / 11, 2 / 11, 2 / 11, 4 / 11])
        assert isinstance(hmm.emission, sp.csr_array)
        np.testing.assert_array_equal(hmm.emission.toarray(), np.eye(4))

    def test_folder_corpus_and_errors(self, tmp_path, corpus):
        (tmp_path / "binary.bin").write_bytes(b"\xff\xfe\x00")
        assert read_documents(tmp_path) == (self.TEXT,)
        with pytest.raises(ValueError, match=r"7 word types; n_states=9 needs at least 8 \("):
            build_model("lm", 9, corpus=str(corpus))
        with pytest.raises(ParameterError, match=r"corpus '.*nowhere' does not exist"):
            build_model("lm", 3, corpus=str(tmp_path / "nowhere"))

    def test_maximum_likelihood_bigrams_restart_at_a_document_start(self, tmp_path):
        (tmp_path / "1.txt").write_text("a b c a b")
        (tmp_path / "2.txt").write_text("b a d")
        # Words a, b (3 each), c, d (1 each), <unk> (none). d only ends a document and
        # <unk> never occurs: both rows are the document-start distribution, a or b.
        start = [0.5, 0.5, 0, 0, 0]
        expected = np.array(
            [[0, 2 / 3, 0, 1 / 3, 0], [0.5, 0, 0.5, 0, 0], [1, 0, 0, 0, 0], start, start]
        )
        for structured in (False, True):
            hmm = build_model("lm", 5, corpus=str(tmp_path), alpha=0, structured=structured)
            np.testing.assert_allclose(toarray(hmm.transition), expected, atol=1e-15)
            assert isinstance(hmm.transition, sp.csr_array) == structured
        np.testing.assert_allclose(hmm.prior, [3 / 8, 3 / 8, 1 / 8, 1 / 8, 0])
        smoothed = build_model("lm_smoothed", 5, corpus=str(tmp_path))
        same = build_model("lm", 5, corpus=str(tmp_path), alpha=0.01)
        np.testing.assert_array_equal(smoothed.transition, same.transition)
        with pytest.raises(ValueError, match="alpha >= 0"):
            build_model("lm", 5, corpus=str(tmp_path), alpha=-1)
        assert not seeded("lm") and not seeded("uniform") and seeded("bell")


class TestPeaked:
    def test_rows(self):
        hmm = build_model("peaked", 200, seed=4, support=8, alpha=0.3, background=0.05)
        T = hmm.transition
        np.testing.assert_allclose(T.sum(axis=1), 1.0)
        assert np.all(np.sort(T, axis=1)[:, :-8] == pytest.approx(0.05 / 200))
        assert np.all((T > 0.05 / 200 + 1e-15).sum(axis=1) <= 8)

    def test_seeds_and_checks(self):
        a, b = (build_model("peaked", 50, seed=s).transition for s in (1, 2))
        assert not np.array_equal(a, b)
        np.testing.assert_array_equal(a, build_model("peaked", 50, seed=1).transition)
        for params, message in (
            ({"support": 0}, "1 <= support"),
            ({"alpha": 0}, "alpha > 0"),
            ({"background": 1.0}, "0 <= background < 1"),
        ):
            with pytest.raises(ValueError, match=message):
                build_model("peaked", 50, **params)


class TestBuildModel:
    def test_unknown_family_lists_allowed(self):
        with pytest.raises(ValueError, match="unknown model family 'foo'; allowed: weather, "):
            build_model("foo", 10)

    def test_unknown_parameter(self):
        with pytest.raises(ValueError, match="unknown parameter 'beta' for model family 'bell'"):
            build_model("bell", 10, beta=1)

    @pytest.mark.parametrize("n", [1, 0, 2.5, True])
    def test_bad_n_states(self, n):
        with pytest.raises(ValueError, match="n_states must be an integer >= 2"):
            build_model("uniform", n)

    @pytest.mark.parametrize("family", ["uniform", "dirichlet", "bell", "peaked", "kernel"])
    def test_a_model_past_the_machines_memory_names_n_states(self, family):
        """10^12 states raised numpy's MemoryError (uniform: a ValueError naming no argument)."""
        with pytest.raises(
            ParameterError,
            match=r"^n_states=1,000,000,000,000 needs 21\.83 TiB of memory \(24 bytes a state, "
            r"the least any model takes: .*\); allowed: at most this machine's [\d,.]+ [KMGT]iB$",
        ) as caught:
            build_model(family, 10**12)
        assert caught.value.parameter == "n_states"
        check_model(family, 10**12)  # the config's check: a sweep's workers may have more

    def test_family_parameters(self):
        assert family_parameters("dirichlet") == {"alpha": 0.1, "n_observations": None}
        assert family_parameters("lm") == {"corpus": None, "alpha": 0.01, "structured": False}
        assert family_parameters("bell") == {"structured": False}
        assert family_parameters("peaked") == {
            "support": 16,
            "alpha": 0.5,
            "background": 0.01,
            "structured": False,
        }


class TestKernel:
    def test_features_estimate_the_softmax(self):
        """phi(u) . phi(v) = sum_f exp(w_f . (u + v) - |u|^2/2 - |v|^2/2) has mean exp(u . v)
        over standard normal w_f: with many features the rows are softmax(u_i . v_j)."""
        n, dim, temperature = 30, 2, 2.0
        hmm = build_model("kernel", n, seed=5, n_features=200_000, dim=dim, temperature=temperature)
        rng = np.random.default_rng([5, 1])  # the transition stream, as kernel.features draws
        scale = 1.0 / np.sqrt(np.sqrt(dim) * temperature)
        U, V = (rng.standard_normal((n, dim)) * scale for _ in range(2))
        T = toarray(hmm.transition)

        def tv_to_softmax(logits):
            softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            return 0.5 * np.abs(T - softmax).sum(axis=1).max()

        assert tv_to_softmax(U @ V.T) < 0.02
        assert tv_to_softmax(2 * U @ V.T) > 0.05  # the temperature is read as documented
        assert (
            np.linalg.matrix_rank(toarray(build_model("kernel", n, n_features=4).transition)) == 4
        )

    def test_features_in_blocks_are_the_whole_arrays_features(self):
        """Past one block of rows (the last block partial), the features are the formula's on
        whole arrays: phi(U) normalised per row, phi(V) by one overall maximum."""
        from pipeline.models.kernel import BLOCK_ROWS, features

        n, dim, F = BLOCK_ROWS + 37, 3, 5
        phi_u, phi_v = features(np.random.default_rng(7), n, dim, F, 0.5)
        rng = np.random.default_rng(7)
        U, V = (rng.standard_normal((n, dim)) / np.sqrt(np.sqrt(dim) * 0.5) for _ in range(2))
        W = rng.standard_normal((F, dim))
        logits_u = U @ W.T - 0.5 * np.sum(U**2, axis=1, keepdims=True)
        logits_v = V @ W.T - 0.5 * np.sum(V**2, axis=1, keepdims=True)
        expected_u = np.exp(logits_u - logits_u.max(axis=1, keepdims=True))
        np.testing.assert_allclose(phi_u, expected_u, rtol=1e-13)
        np.testing.assert_allclose(phi_v, np.exp(logits_v - logits_v.max()), rtol=1e-13)
        assert phi_v.max() == 1.0 and (phi_u.max(axis=1) == 1.0).all()

    def test_band_holds_its_mass_and_the_kernel_the_rest(self):
        n, delta = 40, 3
        banded = toarray(
            build_model("banded_kernel", n, seed=2, delta=delta, band_mass=0.3).transition
        )
        plain = toarray(build_model("kernel", n, seed=2).transition)
        band = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) < delta
        np.testing.assert_allclose(banded.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(np.where(band, banded, 0).sum(axis=1), 0.3, atol=1e-12)
        # Off the band, the row is the kernel's row, rescaled to the remaining 0.7.
        ratio = np.where(band, np.nan, banded / plain)
        np.testing.assert_allclose(np.nanmax(ratio, axis=1), np.nanmin(ratio, axis=1), rtol=1e-10)

    def test_seeds_and_checks(self):
        a, b = (toarray(build_model("kernel", 20, seed=s).transition) for s in (1, 2))
        assert not np.array_equal(a, b)
        np.testing.assert_array_equal(a, toarray(build_model("kernel", 20, seed=1).transition))
        for family, params, message in (
            ("kernel", {"temperature": 0}, "temperature > 0"),
            ("kernel", {"n_features": 0}, "n_features >= 1"),
            ("banded_kernel", {"delta": 11}, "1 <= delta <= n_states / 2"),
            ("banded_kernel", {"band_mass": 1.0}, "0 < band_mass < 1"),
        ):
            with pytest.raises(ValueError, match=message):
                build_model(family, 20, **params)


class TestParameterErrors:
    """Every built-in family's check names the parameter at fault in a one-line error."""

    @pytest.fixture
    def saved_model(self, tmp_path):
        path = tmp_path / "model.npz"
        saved.save(path, initial("softmax", 4, 3), ("a", "b", "<unk>"))
        return str(path)

    @pytest.mark.parametrize(
        "family, n_states, params, parameter",
        [
            ("bell", 5, {}, "n_states"),
            ("dirichlet", 10, {"alpha": 0}, "alpha"),
            ("dirichlet", 10, {"n_observations": 0}, "n_observations"),
            ("peaked", 20, {"support": 21}, "support"),
            ("peaked", 20, {"alpha": -1}, "alpha"),
            ("peaked", 20, {"background": 1.0}, "background"),
            ("uniform", 1, {}, "n_states"),
            ("weather", 7, {}, "n_states"),
            ("lm", 10, {"alpha": -0.5}, "alpha"),
            ("lm", 10, {"corpus": "/no/such/corpus.txt"}, "corpus"),
            ("lm_smoothed", 10, {"corpus": "/no/such/corpus.txt"}, "corpus"),
            ("kernel", 10, {"temperature": 0}, "temperature"),
            ("kernel", 10, {"n_features": 0}, "n_features"),
            ("kernel", 10, {"dim": 1.5}, "dim"),
            ("kernel", 10, {"n_observations": 0}, "n_observations"),
            ("banded_kernel", 10, {"delta": 6}, "delta"),
            ("banded_kernel", 10, {"band_mass": 1.0}, "band_mass"),
            ("banded_kernel", 10, {"temperature": -1}, "temperature"),
            ("hmmlm", 4, {}, "path"),
            ("hmmlm", 4, {"path": "/no/such/model.npz"}, "path"),
        ],
    )
    def test_the_parameter_at_fault_is_named(self, family, n_states, params, parameter):
        with pytest.raises(ParameterError) as caught:
            check_model(family, n_states, **params)
        assert caught.value.parameter == parameter
        assert parameter in str(caught.value) and "\n" not in str(caught.value)

    def test_a_saved_hmm_lm_of_another_size_or_no_model_is_named(self, saved_model, tmp_path):
        with pytest.raises(ParameterError, match=r"4 states, not n_states=5$") as caught:
            check_model("hmmlm", 5, path=saved_model)
        assert caught.value.parameter == "n_states"
        text = tmp_path / "notes.txt"
        text.write_text("not a model")
        with pytest.raises(ParameterError, match="not a model saved by the training") as caught:
            check_model("hmmlm", 4, path=str(text))
        assert caught.value.parameter == "path"
        assert build_model("hmmlm", 4, path=saved_model).n_states == 4
