"""The training sweep (HMM LMs): its config errors, one real run with resume, its report."""

import logging

import numpy as np
import pytest
import xarray as xr
from matplotlib.image import imread

from pipeline.analysis import analyze
from pipeline.hmmlm.parameters import transition_matrix
from pipeline.hmmlm.saved import load, load_adam
from pipeline.kinds.training import sweep as training
from pipeline.kinds.training.grid import TrainingCell
from pipeline.kinds.training.tasks import model_file, train_cell
from pipeline.methods import approximate
from pipeline.models import build_model
from pipeline.operators import LowRank, toarray
from pipeline.sweep import run
from pipeline.sweep.config import ConfigError, validate

from helpers import corpus_folder
from sweeping import assert_warmup_attributes, composed

SMOKE = [
    "experiment=lm_smoke",
    "training.max_states.softmax=16",  # the 32-state softmax is left out
]


@pytest.mark.parametrize(
    "override, expected",
    [
        ("training.parameterisations=[kernel_x]", "unknown parameterisation 'kernel_x'; allowed:"),
        ("training.parameterisations=[kernel_64]", "kernel_64 needs at least 64 states"),
        ("training.n_states=[1]", "training.n_states: 1 is not allowed"),
        ("training.max_epochs=0", "training.max_epochs: 0 is not allowed; allowed: integers >="),
        ("training.corpus=/nowhere/at/all", "training.corpus: /nowhere/at/all does not exist"),
        ("training.n_tokens=20000", "training.n_tokens: 20000 is not allowed with the default"),
        (
            "training.clusters=3",
            "training.n_states: 16 is not allowed with training.clusters=3; "
            "allowed: multiples of 3",
        ),
        (
            "training.clusters=8000",
            "training.clusters: 8000 is not allowed with a vocabulary of "
            "200 words; allowed: 0 to 200",
        ),
        (
            "training.clusters=0",
            "training.state_dropout: drops states within each word cluster; "
            "it needs training.clusters > 0",
        ),
        ("training.state_dropout=1", "training.state_dropout: 1.0 is not allowed; allowed: num"),
        (
            "training.large.n_states=null",
            "training.large.n_states: is null, so training.large's state dropout and rate "
            "apply to no cell",
        ),
        ("training.large.learning_rate=0", "training.large.learning_rate: 0.0 is not allowed"),
        ("training.large.n_states=1", "training.large.n_states: 1 is not allowed; allowed: int"),
        ("training.lr_decay=0", "training.lr_decay: 0.0 is not allowed; allowed: numbers in (0"),
        (
            "training.clustering=brown",
            "training.clustering: 'brown' is not allowed; allowed: exchange, random",
        ),
        ("training.patience=0", "training.patience: 0 is not allowed; allowed: integers >= 1"),
        ("training.clip=0", "training.clip: 0.0 is not allowed; allowed: numbers > 0 or null"),
        (
            "+training.max_states.neural=1",
            "training.max_states.neural: 1 is not allowed; allowed: integers >= 2",
        ),
        (
            "+training.max_states.kernel=64",
            "training.max_states.kernel: unknown "
            "parameterisation 'kernel'; allowed: softmax, neural, kernel_<r>",
        ),
        ("training.max_features=0", "training.max_features: 0 is not allowed; allowed: integ"),
        ("training.grow=true", "training.grow: cannot split a banded kernel's states; allowed"),
        (
            "training.corpus=shakespeare",
            "training.corpus: shakespeare does not exist; allowed: "
            "stdlib, austen or a text file or folder",
        ),
    ],
)
def test_bad_training_settings_are_one_line_errors(override, expected):
    with pytest.raises(ConfigError) as error:
        validate(composed("experiment=lm_smoke", override))
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_the_large_dropout_asks_for_clusters_only_where_a_cell_is_large():
    """An experiment narrowed below its ``training.large.n_states`` (the paper's HMM LM:
    lm_scaling at 7620 states without word clusters) is not refused for the large section's
    state dropout, which applies to no cell; reaching it, it is."""
    unclustered = ["experiment=lm_smoke", "training.clusters=0", "training.state_dropout=0"]
    validate(composed(*unclustered, "training.n_states=[16]"))
    with pytest.raises(ConfigError, match=r"^training\.large\.state_dropout: drops states"):
        validate(composed(*unclustered, "training.n_states=[16,32]"))


def test_austen_before_it_is_fetched_is_a_one_line_error_naming_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(ConfigError) as error:
        validate(composed("experiment=lm_smoke", "training.corpus=austen"))
    message = str(error.value)
    assert message.startswith("training.corpus: corpus 'austen' is not in ") and "\n" not in message
    assert message.endswith("fetch it once: python -m pipeline.corpus fetch austen")


def test_a_grown_cell_starts_from_its_half_split(tmp_path):
    """The 16-state cell starts where the trained 8-state one ended: the split keeps its
    evidence (up to the noise that breaks the copies' tie); each saved model holds the Adam
    state its training was left in, which the grown cell carries on from."""
    corpus = corpus_folder(tmp_path / "texts", " ".join(["the cat sat on the mat and the dog"] * 8))
    settings = [f"training.corpus={corpus}", "training.n_tokens=8", "training.grow=true"]
    cfg = composed("experiment=lm_smoke", *settings, "training.parameterisations=[neural]")
    validate(cfg)
    grid = training.grid(cfg)
    sizes, folder = (8, 16), tmp_path / "models"
    parent = train_cell(TrainingCell(8, "neural", 0), grid.settings, folder, sizes)
    child = train_cell(TrainingCell(16, "neural", 0), grid.settings, folder, sizes)
    assert parent.grown_from == 0 and child.grown_from == 8
    best = parent.perplexity[parent.best_epoch]
    assert child.perplexity[0] == pytest.approx(best, rel=0.02)
    for n in sizes:
        adam = load_adam(model_file(folder, TrainingCell(n, "neural", 0)))
        assert adam is not None and adam.first.transition.E.shape == (n, grid.settings.dim)
        assert adam.step > 0 and np.abs(adam.second.emission).max() > 0


def test_a_corpus_too_small_for_the_vocabulary_is_refused_before_training(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("one two three")
    with pytest.raises(ConfigError, match=r"training\.n_tokens: the training part has 0 words"):
        validate(composed("experiment=lm_smoke", f"training.corpus={corpus}"))


def test_a_cell_trains_and_measures(tmp_path):
    corpus = corpus_folder(tmp_path / "texts", " ".join(["the cat sat on the mat and the dog"] * 8))
    cfg = composed("experiment=lm_smoke", f"training.corpus={corpus}", "training.n_tokens=8")
    validate(cfg)
    grid = training.grid(cfg)
    values = train_cell(TrainingCell(8, "kernel_2", 0), grid.settings)
    perplexity, epochs = values.perplexity, values.epochs
    assert perplexity.shape == (4,) and 2 <= epochs <= 3  # max_epochs 3, patience 2
    assert np.isfinite(perplexity[: epochs + 1]).all() and np.isnan(perplexity[epochs + 1 :]).all()
    best = values.best_epoch
    assert perplexity[best] == np.nanmin(perplexity) < perplexity[0]
    assert values.test_perplexity > 1 and np.isfinite(values.test_perplexity)
    assert np.isnan(values.epoch_seconds[0]) and (values.epoch_seconds[1 : epochs + 1] > 0).all()
    assert values.n_features == 4 and values.tokens_per_second > 0
    assert values.transition_rank <= 4  # a kernel of 4 features, no band
    # The text repeats one sentence: 'the' is followed by cat, mat or dog, which a bigram
    # model cannot tell apart; two words of history can (each of the 10 held-out streams
    # starts without any, so even the 5-gram stays above 1.3).
    kn2, kn3, kn4, kn5, mkn2, mkn3, mkn4, mkn5 = values.baseline_perplexity
    assert kn2 > 1.7 and kn5 <= kn4 <= kn3 < 1.4 and len(values.split) == 16
    assert mkn2 > 1.7 and max(mkn3, mkn4, mkn5) < 1.5
    # every held-out n-gram of the one repeated sentence is in training; streams of 7 tokens
    # have no 8-grams
    np.testing.assert_array_equal(values.seen_validation, [1, 1, 1, np.nan])
    assert values.stopped in ("patience", "max_epochs") and values.grown_from == 0
    # 4 clusters of 2 states over 8 words: prior 8, emissions 2 x 8 (a state emits only its
    # cluster's words), U and V 8 x 8, W 4 x 8
    assert values.stored_parameters == 8 + 2 * 8 + 2 * 64 + 32
    assert values.training_bytes > 4 * 4 * values.stored_parameters  # float32: x, m, v, best


def test_lm_smoke_runs_resumes_and_reports(client, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="pipeline.sweep")
    path = tmp_path / "results.zarr"
    run([*SMOKE, f"store={path}"], client=client)
    assert "5 cells to compute, 0 already done" in caplog.text
    ds = xr.open_zarr(path).load()
    assert dict(ds.sizes) == {
        "n_states": 2,
        "parameterisation": 3,
        "seed": 1,
        "epoch": 4,
        "baseline": 8,
        "ngram": 4,
    }
    assert ds.attrs["kind"] == "training"
    np.testing.assert_array_equal(ds["done"].any("seed"), ds["in_grid"])
    assert ds["in_grid"].sum() == 5 and not ds["in_grid"].sel(
        n_states=32, parameterisation="softmax"
    )
    absent = ds.sel(n_states=32, parameterisation="softmax")
    assert np.isnan(absent["perplexity"]).all() and np.isnan(absent["baseline_perplexity"]).all()
    cells = ds.stack(cell=("n_states", "parameterisation", "seed"))
    trained = cells.isel(cell=np.flatnonzero(cells["done"].values))
    assert trained.sizes["cell"] == 5 and ds["baseline"].values.tolist() == [
        *("kn2", "kn3", "kn4", "kn5"),
        *("mkn2", "mkn3", "mkn4", "mkn5"),
    ]
    for name in ("baseline_perplexity", "baseline_test_perplexity"):
        values = trained[name].transpose("cell", "baseline").values
        assert np.isfinite(values).all() and (values == values[0]).all()  # one per sweep
        assert ds[name].attrs["units"] == "1" and "Kneser-Ney" in ds[name].attrs["long_name"]
    assert len(set(trained["split"].values.ravel())) == 1
    best = trained["perplexity"].min("epoch")
    assert (best < trained["perplexity"].isel(epoch=0)).all()
    assert (trained["perplexity"].isel(epoch=trained["best_epoch"].astype(int)) == best).all()
    assert np.isfinite(trained["test_perplexity"]).all()
    assert ds["test_perplexity"].attrs["units"] == "1"
    assert ds["perplexity"].attrs["long_name"].startswith("validation perplexity")
    assert ds["epoch_seconds"].attrs["units"] == "s"
    assert_warmup_attributes(ds, training.SCHEMA)
    caplog.clear()
    run([*SMOKE, f"store={path}"], client=client)
    assert "0 cells to compute, 5 already done" in caplog.text
    models = sorted(p.name for p in (tmp_path / "results_models").iterdir())
    assert models[0] == "16-banded_kernel_4-0.npz" and len(models) == 5
    report = analyze(path, tmp_path / "report").report
    text = report.read_text()
    assert "| 32 | kernel_4 | 8 |" in text
    for name in ("perplexity.png", "epoch_seconds.png", "curves.png"):
        assert f"![{name}]({name})" in text
        assert np.ptp(imread(tmp_path / "report" / name)[..., :3]) > 0.5


def test_a_large_cell_trains_with_the_large_dropout_and_rate(tmp_path):
    """``training.large``: the 32-state cell of lm_smoke trains as the section's keys set to
    the large ones would train it (the same validation curve, bit for bit), and unlike the
    section's own; the 16-state cell as the section's."""
    corpus = corpus_folder(tmp_path / "texts", " ".join(["a b c d a b e f g h"] * 12))
    common = ["experiment=lm_smoke", f"training.corpus={corpus}", "training.n_tokens=8",
              "training.max_epochs=2", "training.patience=null"]  # fmt: skip
    section = ["training.state_dropout=0.25", "training.learning_rate=0.025"]

    def curve(n_states: int, *overrides: str) -> np.ndarray:
        settings = training.grid(composed(*common, *overrides)).settings
        return train_cell(TrainingCell(n_states, "kernel_4", 0), settings).perplexity

    large = curve(32)
    np.testing.assert_array_equal(large, curve(32, *section, "training.large.n_states=64"))
    assert not np.array_equal(large, curve(32, "training.large.n_states=64"))
    np.testing.assert_array_equal(curve(16), curve(16, "training.large.n_states=64"))


def test_a_saved_model_is_an_hmm_every_method_runs_on(tmp_path):
    corpus = corpus_folder(tmp_path / "texts", " ".join(["a b c d a b e f"] * 8))
    settings = [f"training.corpus={corpus}", "training.n_tokens=6", "training.max_epochs=1"]
    cases = {  # unblocked float64 softmax; blocked float32 banded kernel, 3 clusters of 2
        "softmax": ("training.clusters=0", "training.state_dropout=0", np.ndarray),
        "banded_kernel_4": ("training.clusters=3", "training.state_dropout=0", LowRank),
    }
    for name, (*overrides, kind) in cases.items():
        grid = training.grid(composed("experiment=lm_smoke", *settings, *overrides))
        train_cell(TrainingCell(6, name, 0), grid.settings, tmp_path / "models")
        path = model_file(tmp_path / "models", TrainingCell(6, name, 0))
        hmm = build_model("hmmlm", 6, path=str(path))
        p, words, blocks = load(path)
        assert isinstance(hmm.transition, kind) and words[-1] == "<unk>" and len(words) == 6
        as_float = type(p.transition)(*(x.astype(float) for x in p.transition))
        np.testing.assert_allclose(toarray(hmm.transition), toarray(transition_matrix(as_float)))
        for method, setting in (("topp", 0.9), ("lowrank", 2)):
            assert approximate(hmm, method, setting).hmm.n_states == 6
    # The blocked model: each state emits exactly the words of its cluster, nothing else.
    assert blocks.n_clusters == 3 and blocks.states == 2 and p.emission.dtype == np.float32
    emission = toarray(hmm.emission)
    for state in range(6):
        words_of_state = np.flatnonzero(blocks.cluster == state // 2)
        assert (emission[state, words_of_state] > 0).all()
        assert (np.delete(emission[state], words_of_state) == 0).all()
    with pytest.raises(ValueError, match="holds a model of 6 states, not n_states=9"):
        build_model("hmmlm", 9, path=str(path))
    with pytest.raises(ValueError, match="needs path="):
        build_model("hmmlm", 6)
