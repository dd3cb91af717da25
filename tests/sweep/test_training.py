"""The training sweep (HMM LMs): its config errors, one real run with resume, its report."""

import numpy as np
import pytest
import xarray as xr
from matplotlib.image import imread

from pipeline.analysis import analyze
from pipeline.hmmlm.data import part
from pipeline.hmmlm.parameters import transition_matrix
from pipeline.hmmlm.saved import load
from pipeline.methods import approximate
from pipeline.models import build_model
from pipeline.operators import LowRank, toarray
from pipeline.sweep.config import ConfigError
from pipeline.sweep.kinds import training, validate
from pipeline.sweep.kinds.training import TrainingCell, model_file, train_cell

from helpers import composed, sweep

SMOKE = ["experiment=lm_smoke", "cluster.dashboard_address=:0", "cluster.n_workers=2"]


def _corpus(folder, text, train=8):
    """A folder of ``train`` training documents of ``text`` and one validation and one test
    document of it (numbers, which are not words, make their texts differ)."""
    folder.mkdir()
    wanted = ["train"] * train + ["validation", "test"]
    numbers = iter(range(10_000))
    for k, name in enumerate(wanted):
        document = next(
            d for d in (f"{text} {next(numbers)}" for _ in range(10_000)) if part(d) == name
        )
        (folder / f"{k}.txt").write_text(document)
    return folder


@pytest.mark.parametrize(
    "override, expected",
    [
        ("training.parameterisations=[kernel_x]", "unknown parameterisation 'kernel_x'; allowed:"),
        ("training.parameterisations=[kernel_64]", "kernel_64 needs at least 64 states"),
        ("training.n_states=[1]", "training.n_states: 1 is not allowed"),
        ("training.epochs=0", "training.epochs: 0 is not allowed; allowed: integers >= 1"),
        ("training.corpus=/nowhere/at/all", "training.corpus: /nowhere/at/all does not exist"),
        ("training.n_tokens=20000", "training.n_tokens: 20000 is not allowed with the default"),
    ],
)
def test_bad_training_settings_are_one_line_errors(override, expected):
    with pytest.raises(ConfigError) as error:
        validate(composed("experiment=lm_smoke", override))
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_a_corpus_too_small_for_the_vocabulary_is_refused_before_training(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("one two three")
    with pytest.raises(ConfigError, match=r"training\.n_tokens: the training part has 0 words"):
        validate(composed("experiment=lm_smoke", f"training.corpus={corpus}"))


def test_a_cell_trains_and_measures(tmp_path):
    corpus = _corpus(tmp_path / "texts", " ".join(["the cat sat on the mat and the dog"] * 8))
    cfg = composed("experiment=lm_smoke", f"training.corpus={corpus}", "training.n_tokens=8")
    validate(cfg)
    grid = training.grid(cfg)
    values = train_cell(TrainingCell(8, "kernel_2", 0), grid.settings).values()
    perplexity = values["perplexity"]
    assert perplexity.shape == (3,) and perplexity[-1] < perplexity[0]
    assert np.isnan(values["epoch_seconds"][0]) and (values["epoch_seconds"][1:] > 0).all()
    assert values["n_features"] == 4 and values["tokens_per_second"] > 0
    # The text repeats one sentence: 'the' is followed by cat, mat or dog, which a bigram
    # model cannot tell apart; two words of history can.
    kn2, kn3, kn4, kn5 = values["baseline_perplexity"]
    assert kn2 > 1.3 and kn5 <= kn4 <= kn3 < 1.2 and len(values["split"]) == 16
    # U, V (8 x 8 each), W (4 x 8), no band, prior (8), emissions (8 x (7 words + <unk>))
    assert values["stored_parameters"] == 2 * 64 + 32 + 8 + 8 * 8


def test_lm_smoke_runs_resumes_and_reports(tmp_path):
    first = sweep(*SMOKE, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "6 cells to compute, 0 already done" in first.stderr
    path = tmp_path / "outputs" / "lm_smoke" / "results.zarr"
    ds = xr.open_zarr(path).load()
    assert dict(ds.sizes) == {
        "n_states": 2,
        "parameterisation": 3,
        "seed": 1,
        "epoch": 3,
        "baseline": 4,
    }
    assert ds["done"].all() and ds.attrs["kind"] == "training"
    assert ds["baseline"].values.tolist() == ["kn2", "kn3", "kn4", "kn5"]
    for name in ("baseline_perplexity", "baseline_test_perplexity"):
        values = ds[name].values.reshape(-1, 4)
        assert np.isfinite(values).all() and (values == values[0]).all()  # one per sweep
        assert ds[name].attrs["units"] == "1" and "Kneser-Ney" in ds[name].attrs["long_name"]
    assert len(set(ds["split"].values.ravel())) == 1
    assert (ds["perplexity"].isel(epoch=-1) < ds["perplexity"].isel(epoch=0)).all()
    assert ds["perplexity"].attrs["long_name"].startswith("validation perplexity")
    assert ds["epoch_seconds"].attrs["units"] == "s"
    again = sweep(*SMOKE, cwd=tmp_path)
    assert again.returncode == 0 and "0 cells to compute, 6 already done" in again.stderr
    models = sorted(
        p.name for p in (tmp_path / "outputs" / "lm_smoke" / "results_models").iterdir()
    )
    assert models[0] == "16-banded_kernel_4-0.npz" and len(models) == 6
    report = analyze(path, tmp_path / "report").report
    text = report.read_text()
    assert "| 32 | kernel_4 | 8 |" in text
    for name in ("perplexity.png", "epoch_seconds.png", "curves.png"):
        assert f"![{name}]({name})" in text
        assert np.ptp(imread(tmp_path / "report" / name)[..., :3]) > 0.5


def test_a_saved_model_is_an_hmm_every_method_runs_on(tmp_path):
    corpus = _corpus(tmp_path / "texts", " ".join(["a b c d a b e f"] * 8))
    cfg = composed("experiment=lm_smoke", f"training.corpus={corpus}", "training.n_tokens=6")
    grid = training.grid(cfg)
    for name in ("softmax", "banded_kernel_4"):
        train_cell(TrainingCell(8, name, 0), grid.settings, tmp_path / "models")
    for name, kind in (("softmax", np.ndarray), ("banded_kernel_4", LowRank)):
        path = model_file(tmp_path / "models", TrainingCell(8, name, 0))
        hmm = build_model("hmmlm", 8, path=str(path))
        p, words, _ = load(path)
        assert isinstance(hmm.transition, kind) and words[-1] == "<unk>" and len(words) == 6
        np.testing.assert_allclose(
            toarray(hmm.transition), toarray(transition_matrix(p.transition))
        )
        for method, setting in (("topp", 0.9), ("lowrank", 2)):
            assert approximate(hmm, method, setting).hmm.n_states == 8
    with pytest.raises(ValueError, match="holds a model of 8 states, not n_states=9"):
        build_model("hmmlm", 9, path=str(path))
    with pytest.raises(ValueError, match="needs path="):
        build_model("hmmlm", 8)
