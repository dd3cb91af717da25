"""The training sweep: HMM language models over state counts, parameterisations and seeds
(the kernel HMMs of Chiu, Deng and Rush, *Scaling Hidden Markov Language Models*, with the
blocked emissions and state dropout of Chiu and Rush 2020).

A config with a ``training`` section (``experiment=lm_scaling``, ``lm_smoke``) trains one
HMM LM per cell ``(n_states, parameterisation, seed)`` as a Dask task (``train_cell``)
until its validation perplexity stops improving, and stores, per cell, the validation
perplexity after every epoch, the test perplexity at the best epoch, the seconds of every
epoch, and the Kneser-Ney baselines of the same split (``pipeline.results.training``).
Each trained model is saved next to the store, in ``<store name>_models/``
(``<n_states>-<parameterisation>-<seed>.npz``), where the ``hmmlm`` model family reads it.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from distributed import Client, Future
from omegaconf import OmegaConf

from pipeline.hmmlm import clusters, data, ngram, saved
from pipeline.hmmlm.parameters import PARAMETERISATIONS, initial, parse, transition_matrix
from pipeline.hmmlm.train import Schedule, perplexity, train
from pipeline.operators import toarray
from pipeline.results import training as results
from pipeline.sweep.config import ConfigError, check_list
from pipeline.sweep.kinds.base import Grid, Values, submit_each

SCHEMA = results.SCHEMA
SECTION = "training"
summary = results.summary

DEFAULT_MAX_EPOCHS = 20
"""``max_epochs`` when neither it nor ``epochs`` is set."""


class TrainingCell(NamedTuple):
    n_states: int
    parameterisation: str
    seed: int


@dataclass(frozen=True)
class TrainingGrid(Grid):
    """The cells of a validated config's ``training`` section and what every cell shares."""

    n_states: tuple[int, ...]
    parameterisations: tuple[str, ...]
    seeds: tuple[int, ...]
    settings: dict
    """Every other key of ``training`` (max_epochs resolved, batch, length, ...)."""

    Cell = TrainingCell

    def axes(self) -> dict[str, tuple]:
        return {
            "n_states": self.n_states,
            "parameterisation": self.parameterisations,
            "seed": self.seeds,
            "epoch": tuple(range(self.settings["max_epochs"] + 1)),
            "baseline": results.BASELINES,
        }

    def cells(self) -> list[TrainingCell]:
        """Every cell, largest models first (they take longest); the softmax only up to
        ``softmax_max_states``."""
        return [
            TrainingCell(n, name, seed)
            for n in reversed(self.n_states)
            for name in self.parameterisations
            for seed in self.seeds
            if name != "softmax" or n <= self.settings["softmax_max_states"]
        ]

    def identity(self) -> dict:
        return {
            "kind": SCHEMA.name,
            "n_states": self.n_states,
            "parameterisations": self.parameterisations,
            "seeds": self.seeds,
            **self.settings,
        }


def grid(cfg) -> TrainingGrid:
    """The grid of a validated config."""
    training = OmegaConf.to_container(cfg.training, resolve=True)
    epochs = training.pop("epochs")
    training["max_epochs"] = training["max_epochs"] or epochs or DEFAULT_MAX_EPOCHS
    return TrainingGrid(
        n_states=tuple(sorted(training.pop("n_states"))),
        parameterisations=tuple(training.pop("parameterisations")),
        seeds=tuple(sorted(training.pop("seeds"))),
        settings=training,
    )


def _check_at_least(training, key: str, least: int) -> None:
    value = training[key]
    if value is not None and value < least:
        raise ConfigError(
            f"training.{key}", f"{value} is not allowed; allowed: integers >= {least}"
        )


def _validate_blocks(training) -> None:
    """``clusters``, ``clustering`` and ``state_dropout`` against the state counts."""
    C = training.clusters
    _check_at_least(training, "clusters", 0)
    if training.clustering not in clusters.CLUSTERINGS:
        raise ConfigError(
            "training.clustering",
            f"{training.clustering!r} is not allowed; allowed: {', '.join(clusters.CLUSTERINGS)}",
        )
    if not 0 <= training.state_dropout < 1:
        raise ConfigError(
            "training.state_dropout",
            f"{training.state_dropout} is not allowed; allowed: 0 <= x < 1",
        )
    if training.state_dropout and not C:
        raise ConfigError(
            "training.state_dropout",
            "drops states within each word cluster; it needs training.clusters > 0",
        )
    vocabulary = training.n_tokens or data.DEFAULT_VOCABULARY
    if training.corpus is None and C > vocabulary:
        raise ConfigError(
            "training.clusters",
            f"{C} is not allowed with a vocabulary of {vocabulary} words; "
            f"allowed: 0 to {vocabulary}",
        )
    for n in training.n_states if C else ():
        if n % C:
            raise ConfigError(
                "training.n_states",
                f"{n} is not allowed with training.clusters={C}; allowed: multiples of {C} "
                "(each cluster owns n_states / clusters states)",
            )


def validate(cfg) -> None:
    """Raise ``ConfigError`` naming the first invalid key of ``training``."""
    training = cfg.training
    check_list("training.n_states", training.n_states, int, "integers >= 2")
    check_list("training.parameterisations", training.parameterisations, str, PARAMETERISATIONS)
    check_list("training.seeds", training.seeds, int, "integers >= 0")
    for n in training.n_states:
        if n < 2:
            raise ConfigError("training.n_states", f"{n} is not allowed; allowed: integers >= 2")
        for name in training.parameterisations:
            try:
                parse(name, n)
            except ValueError as error:
                raise ConfigError("training.parameterisations", str(error)) from None
    for key, least in (("max_epochs", 1), ("epochs", 1), ("patience", 1), ("batch", 1)):
        _check_at_least(training, key, least)
    if (
        None not in (training.epochs, training.max_epochs)
        and training.epochs != training.max_epochs
    ):
        raise ConfigError(
            "training.epochs", "is the former name of training.max_epochs; set one of the two"
        )
    for key, least in (("length", 2), ("dim", 1), ("delta", 1), ("n_tokens", 2)):
        _check_at_least(training, key, least)
    _check_at_least(training, "softmax_max_states", 2)
    for key in ("train_chunks", "held_out_chunks"):
        _check_at_least(training, key, 1)
    if not training.learning_rate > 0:
        raise ConfigError("training.learning_rate", "must be a number > 0")
    _validate_blocks(training)
    if training.corpus is None:
        if training.n_tokens is not None and training.n_tokens > data.DEFAULT_VOCABULARY:
            raise ConfigError(
                "training.n_tokens",
                f"{training.n_tokens} is not allowed with the default corpus; allowed: "
                f"2 to {data.DEFAULT_VOCABULARY}, null (every word seen twice in training), "
                "or a larger training.corpus",
            )
        return
    _validate_corpus(training)


def _validate_corpus(training) -> None:
    """A user's corpus is read here, once, so a small one fails before any training."""
    if not Path(training.corpus).exists():
        raise ConfigError("training.corpus", f"{training.corpus} does not exist")
    try:
        corpus = _corpus(training.corpus, training.n_tokens, training.length)
    except ValueError as error:
        raise ConfigError("training.n_tokens", str(error)) from None
    for name in data.PARTS:
        if not len(getattr(corpus, name)):
            raise ConfigError(
                "training.corpus",
                f"{training.corpus} leaves no {name} chunk of training.length="
                f"{training.length} tokens; give more documents (the split is by document)",
            )
    if training.clusters > len(corpus.words):
        raise ConfigError(
            "training.clusters",
            f"{training.clusters} is not allowed with a vocabulary of {len(corpus.words)} "
            f"words; allowed: 0 to {len(corpus.words)}",
        )


@functools.cache
def _corpus(corpus: str | None, n_tokens: int | None, length: int) -> data.Corpus:
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
    corpus = _corpus(settings["corpus"], settings["n_tokens"], settings["length"])
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
        settings["max_epochs"], settings["patience"], settings["batch"], settings["learning_rate"]
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


def models_folder(store: Path) -> Path:
    """Where the trained models of the store ``store`` are saved: ``<store name>_models/``
    beside it (workers must see it at the same path)."""
    return store.parent.resolve() / f"{store.stem}_models"


def submit(
    client: Client, grid: TrainingGrid, cells: list[TrainingCell], *, cfg, store: Path
) -> dict[Future, list[TrainingCell]]:
    """One task per cell; the future of each and the cells it computes."""
    return submit_each(
        client,
        train_cell,
        cells,
        grid.settings,
        models_folder(store),
        prefix="train",
        retries=cfg.retries,
    )
