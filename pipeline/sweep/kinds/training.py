"""The training sweep: HMM language models over state counts, parameterisations and seeds
(the kernel HMMs of Chiu, Deng and Rush, *Scaling Hidden Markov Language Models*).

A config with a ``training`` section (``experiment=lm_scaling``, ``lm_smoke``) trains one
HMM LM per cell ``(n_states, parameterisation, seed)`` as a Dask task (``train_cell``) and
stores, per cell, the held-out perplexity after every epoch, the seconds of every epoch
and the tokens per second of inference (``pipeline.results.training``). Each trained model
is saved next to the store, in ``<store name>_models/``
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

from pipeline.hmmlm import data, evidence, ngram, saved
from pipeline.hmmlm.parameters import (
    PARAMETERISATIONS,
    initial,
    parse,
    softmax_rows,
    transition_matrix,
)
from pipeline.hmmlm.train import train
from pipeline.results import training as results
from pipeline.sweep.config import ConfigError, check_list
from pipeline.sweep.kinds.base import Grid, Values, submit_each

SCHEMA = results.SCHEMA
SECTION = "training"
summary = results.summary


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
    """Every other key of ``training`` (epochs, batch, length, ...)."""

    Cell = TrainingCell

    def axes(self) -> dict[str, tuple]:
        return {
            "n_states": self.n_states,
            "parameterisation": self.parameterisations,
            "seed": self.seeds,
            "epoch": tuple(range(self.settings["epochs"] + 1)),
            "baseline": results.BASELINES,
        }

    def cells(self) -> list[TrainingCell]:
        """Every cell, largest models first (they take longest)."""
        return [
            TrainingCell(n, name, seed)
            for n in reversed(self.n_states)
            for name in self.parameterisations
            for seed in self.seeds
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
    return TrainingGrid(
        n_states=tuple(sorted(training.pop("n_states"))),
        parameterisations=tuple(training.pop("parameterisations")),
        seeds=tuple(sorted(training.pop("seeds"))),
        settings=training,
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
    for key in ("epochs", "batch", "length", "dim", "delta"):
        least = 2 if key == "length" else 1
        if training[key] < least:
            raise ConfigError(
                f"training.{key}", f"{training[key]} is not allowed; allowed: integers >= {least}"
            )
    for key in ("train_chunks", "held_out_chunks"):
        if training[key] is not None and training[key] < 1:
            raise ConfigError(f"training.{key}", f"{training[key]} is not allowed; allowed: >= 1")
    if not training.learning_rate > 0:
        raise ConfigError("training.learning_rate", "must be a number > 0")
    if training.n_tokens is not None and training.n_tokens < 2:
        raise ConfigError(
            "training.n_tokens", f"{training.n_tokens} is not allowed; allowed: integers >= 2"
        )
    if training.corpus is None:
        if training.n_tokens is not None and training.n_tokens > data.DEFAULT_VOCABULARY:
            raise ConfigError(
                "training.n_tokens",
                f"{training.n_tokens} is not allowed with the default corpus; allowed: "
                f"2 to {data.DEFAULT_VOCABULARY}, null (every word seen twice in training), "
                "or a larger training.corpus",
            )
        return
    if not Path(training.corpus).exists():
        raise ConfigError("training.corpus", f"{training.corpus} does not exist")
    try:  # a user's corpus is read here, once, so a small one fails before any training
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


@functools.cache
def _corpus(corpus: str | None, n_tokens: int | None, length: int) -> data.Corpus:
    """The corpus as chunks, read once per worker process."""
    return data.load(corpus, n_tokens, length)


@functools.cache
def baselines(settings_key: str) -> tuple[np.ndarray, np.ndarray]:
    """Validation and test perplexity of each Kneser-Ney baseline (``results.BASELINES``),
    on the chunks every model of the sweep trains and is scored on; once per worker
    process (``settings_key``: the settings as JSON)."""
    settings = json.loads(settings_key)
    corpus = _corpus(settings["corpus"], settings["n_tokens"], settings["length"])
    train, validation, test = _parts(corpus, settings)
    scores = np.empty((2, len(results.BASELINES)))
    for k, name in enumerate(results.BASELINES):
        model = ngram.fit(train, int(name.removeprefix("kn")), len(corpus.words))
        scores[:, k] = ngram.perplexity(model, validation), ngram.perplexity(model, test)
    return scores[0], scores[1]


def _parts(corpus: data.Corpus, settings: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The training, validation and test chunks a sweep uses (``train_chunks`` and
    ``held_out_chunks`` keep the first of each)."""
    held_out = settings["held_out_chunks"]
    return (
        corpus.train[: settings["train_chunks"]],
        corpus.validation[:held_out],
        corpus.test[:held_out],
    )


def model_file(folder: Path, cell: TrainingCell) -> Path:
    """Where the model of ``cell`` is saved in ``folder``."""
    return folder / f"{cell.n_states}-{cell.parameterisation}-{cell.seed}.npz"


def train_cell(cell: TrainingCell, settings: dict, models: Path | None = None) -> Values:
    """Train one HMM LM and measure it (``settings``: the ``training`` section's keys); save
    the trained model in the folder ``models`` (``pipeline.hmmlm.saved``) if given."""
    corpus = _corpus(settings["corpus"], settings["n_tokens"], settings["length"])
    chunks, held_out, _ = _parts(corpus, settings)
    baseline, baseline_test = baselines(json.dumps(settings, sort_keys=True))
    kind, n_features, banded = parse(cell.parameterisation, cell.n_states)
    start = initial(
        kind,
        cell.n_states,
        len(corpus.words),
        n_features=n_features,
        delta=settings["delta"] if banded else 0,
        dim=settings["dim"],
        seed=cell.seed,
    )
    result = train(
        start,
        chunks,
        held_out,
        epochs=settings["epochs"],
        batch=settings["batch"],
        learning_rate=settings["learning_rate"],
        seed=cell.seed,
    )
    p = result.parameters
    if models is not None:
        models.mkdir(parents=True, exist_ok=True)
        saved.save(model_file(models, cell), p, corpus.words)
    prior, T, emission = (
        softmax_rows(p.prior),
        transition_matrix(p.transition),
        softmax_rows(p.emission),
    )
    begin = time.perf_counter()
    for k in range(0, len(held_out), settings["batch"]):
        evidence.log_evidence(prior, T, emission, held_out[k : k + settings["batch"]])
    seconds = time.perf_counter() - begin
    leaves = [p.prior, p.emission, *p.transition]
    return Values(
        {
            "perplexity": result.perplexity,
            "epoch_seconds": np.concatenate([[np.nan], result.epoch_seconds]),
            "tokens_per_second": held_out.size / seconds,
            "n_features": n_features,
            "stored_parameters": sum(leaf.size for leaf in leaves),
            "train_tokens": chunks.size,
            "validation_tokens": held_out.size,
            "vocabulary": len(corpus.words),
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
