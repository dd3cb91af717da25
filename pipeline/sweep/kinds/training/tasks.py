"""What a worker of the training sweep runs: ``train_cell`` trains one HMM LM and measures it
against the Kneser-Ney baselines of the same split (shared once per worker process)."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import numpy as np

from pipeline.hmmlm import clusters, data, ngram, saved
from pipeline.hmmlm.parameters import initial, parse, transition_matrix
from pipeline.hmmlm.train import Schedule, perplexity, train
from pipeline.operators import toarray
from pipeline.results import training as results
from pipeline.sweep.kinds.base import Values
from pipeline.sweep.kinds.training.grid import TrainingCell


@functools.cache
def load_corpus(corpus: str | None, n_tokens: int | None, length: int) -> data.Corpus:
    """The corpus as chunks, read once per worker process."""
    return data.load(corpus, n_tokens, length)


def _parts(corpus: data.Corpus, settings: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The training, validation and test chunks a sweep uses (``train_chunks`` and
    ``held_out_chunks`` keep the first of each)."""
    held_out = settings["held_out_chunks"]
    return (
        corpus.train[: settings["train_chunks"]],
        corpus.validation[:held_out],
        corpus.test[:held_out],
    )


@functools.cache
def _shared(settings_key: str) -> tuple[data.Corpus, tuple, np.ndarray, np.ndarray]:
    """What every cell of a sweep shares, once per worker process (``settings_key``: the
    settings as JSON): the corpus, its parts, and the validation and test perplexity of
    each Kneser-Ney baseline (``results.BASELINES``) on those chunks."""
    settings = json.loads(settings_key)
    corpus = load_corpus(settings["corpus"], settings["n_tokens"], settings["length"])
    train_part, validation, test = parts = _parts(corpus, settings)
    scores = np.empty((2, len(results.BASELINES)))
    for k, name in enumerate(results.BASELINES):
        model = ngram.fit(train_part, int(name.removeprefix("kn")), len(corpus.words))
        scores[:, k] = ngram.perplexity(model, validation), ngram.perplexity(model, test)
    return corpus, parts, scores[0], scores[1]


@functools.cache
def _word_clusters(settings_key: str, seed: int) -> np.ndarray:
    """The word clusters of a sweep's training chunks (the random partition per seed)."""
    settings = json.loads(settings_key)
    corpus, (train_part, _, _), _, _ = _shared(settings_key)
    name = settings["clustering"]
    return clusters.clustering(
        name, train_part, len(corpus.words), settings["clusters"], seed if name == "random" else 0
    )


def model_file(folder: Path, cell: TrainingCell) -> Path:
    """Where the model of ``cell`` is saved in ``folder``."""
    return folder / f"{cell.n_states}-{cell.parameterisation}-{cell.seed}.npz"


def _padded(values: np.ndarray, length: int, head: float | None = None) -> np.ndarray:
    """``values`` (after ``head``) padded with NaN to ``length``."""
    values = np.asarray(values, dtype=float) if head is None else np.r_[head, values]
    return np.concatenate([values, np.full(length - len(values), np.nan)])


def _transition_rank(p, n_states: int) -> float:
    """Singular values of the transition matrix above 1e-5 (NaN above the limit)."""
    if n_states > results.SPECTRUM_MAX_STATES:
        return np.nan
    T = toarray(transition_matrix(type(p.transition)(*(x.astype(float) for x in p.transition))))
    return float((np.linalg.svd(T, compute_uv=False) > 1e-5).sum())


def train_cell(cell: TrainingCell, settings: dict, models: Path | None = None) -> Values:
    """Train one HMM LM and measure it (``settings``: the ``training`` section's keys); save
    the trained model in the folder ``models`` (``pipeline.hmmlm.saved``) if given."""
    key = json.dumps(settings, sort_keys=True)
    corpus, (train_part, validation, test), baseline, baseline_test = _shared(key)
    kind, n_features, banded = parse(cell.parameterisation, cell.n_states)
    V, C = len(corpus.words), settings["clusters"]
    blocks = clusters.blocks_of(_word_clusters(key, cell.seed), cell.n_states // C) if C else None
    start = initial(
        kind,
        cell.n_states,
        V,
        n_features=n_features,
        delta=settings["delta"] if banded else 0,
        dim=settings["dim"],
        seed=cell.seed,
        emission_size=None if blocks is None else blocks.states * V,
        dtype=np.float64 if blocks is None else np.float32,
    )
    schedule = Schedule(
        settings["max_epochs"],
        settings["patience"],
        settings["batch"],
        settings["learning_rate"],
        settings["lr_decay"],
    )
    result = train(
        start,
        train_part,
        validation,
        schedule,
        blocks=blocks,
        state_dropout=settings["state_dropout"],
        seed=cell.seed,
    )
    p = result.parameters
    if models is not None:
        models.mkdir(parents=True, exist_ok=True)
        saved.save(model_file(models, cell), p, corpus.words, blocks)
    begin = time.perf_counter()
    test_perplexity = perplexity(p, test, blocks)
    seconds = time.perf_counter() - begin
    length = settings["max_epochs"] + 1
    leaves = [p.prior, p.emission, *p.transition]
    return Values(
        {
            "perplexity": _padded(result.perplexity, length),
            "epoch_seconds": _padded(result.epoch_seconds, length, head=np.nan),
            "best_epoch": result.best_epoch,
            "test_perplexity": test_perplexity,
            "epochs": len(result.epoch_seconds),
            "tokens_per_second": test.size / seconds,
            "n_features": n_features,
            "stored_parameters": sum(leaf.size for leaf in leaves),
            "training_bytes": result.training_bytes,
            "transition_rank": _transition_rank(p, cell.n_states),
            "train_tokens": train_part.size,
            "validation_tokens": validation.size,
            "test_tokens": test.size,
            "vocabulary": V,
            "split": corpus.split,
            "baseline_perplexity": baseline,
            "baseline_test_perplexity": baseline_test,
        }
    )
