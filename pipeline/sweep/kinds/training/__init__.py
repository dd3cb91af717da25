"""The training sweep: HMM language models over state counts, parameterisations and seeds
(the kernel HMMs of Chiu, Deng and Rush, *Scaling Hidden Markov Language Models*, with the
blocked emissions and state dropout of Chiu and Rush 2020).

A config with a ``training`` section (``experiment=lm_scaling``, ``lm_smoke``) trains one
HMM LM per cell ``(n_states, parameterisation, seed)`` as a Dask task (``tasks.train_cell``)
until its validation perplexity stops improving, and stores, per cell, the validation
perplexity after every epoch, the test perplexity at the best epoch, the seconds of every
epoch, and the Kneser-Ney baselines of the same split (``pipeline.results.training``).
Each trained model is saved next to the store, in ``<store name>_models/``
(``<n_states>-<parameterisation>-<seed>.npz``), where the ``hmmlm`` model family reads it.
``grid`` holds the cells, ``tasks`` what the workers run; this module validates the
section and submits the cells.
"""

from __future__ import annotations

from pathlib import Path

from distributed import Client, Future

from pipeline.hmmlm import clusters, data
from pipeline.hmmlm.parameters import PARAMETERISATIONS, parse
from pipeline.results import training as results
from pipeline.sweep.config import ConfigError, check_list
from pipeline.sweep.kinds.base import submit_each
from pipeline.sweep.kinds.training.grid import TrainingCell, TrainingGrid, grid
from pipeline.sweep.kinds.training.tasks import load_corpus, train_cell

SCHEMA = results.SCHEMA
SECTION = "training"
summary = results.summary

__all__ = ["SCHEMA", "SECTION", "grid", "submit", "summary", "validate"]


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
    if not 0 < training.lr_decay <= 1:
        raise ConfigError(
            "training.lr_decay", f"{training.lr_decay} is not allowed; allowed: 0 < x <= 1"
        )
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
        corpus = load_corpus(training.corpus, training.n_tokens, training.length)
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
    )
