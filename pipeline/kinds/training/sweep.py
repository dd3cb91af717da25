"""The training sweep: HMM language models over state counts, parameterisations and seeds
(the kernel HMMs of Chiu, Deng and Rush, *Scaling Hidden Markov Language Models*, with the
blocked emissions and state dropout of Chiu and Rush 2020).

A config with a ``training`` section (``experiment=lm_scaling``, ``lm_smoke``) trains one
HMM LM per cell ``(n_states, parameterisation, seed)`` as a Dask task (``tasks.train_cell``)
until its validation perplexity stops improving, and stores, per cell, the validation
perplexity after every epoch, the test perplexity at the best epoch, the seconds of every
epoch, the Kneser-Ney baselines of the same split and how much of the held-out n-grams
training holds (``results``). Each trained model is saved next to the store, in
``<store name>_models/`` (``<n_states>-<parameterisation>-<seed>.npz``), where the
``hmmlm`` model family reads it; with ``training.grow`` a cell starts from the saved model
of half its states, so its task waits for that one's. ``config`` types the section,
``grid`` holds the cells, ``tasks`` what the workers run; this module, the kind's
``pipeline.sweep.kind.SweepKind``, checks the section and submits the cells.
"""

from __future__ import annotations

from pathlib import Path

from dask import delayed
from dask.delayed import Delayed
from distributed import Client, Future

from pipeline import corpus as corpora
from pipeline.hmmlm import clusters, data
from pipeline.hmmlm.parameters import PARAMETERISATIONS, parse
from pipeline.kinds.training import results
from pipeline.kinds.training.config import TrainingConfig, is_large
from pipeline.kinds.training.grid import TrainingCell, TrainingGrid, grid
from pipeline.kinds.training.tasks import grown_from, load_corpus, train_cell
from pipeline.sweep.config import check_list
from pipeline.sweep.config.errors import ConfigError

SCHEMA = results.SCHEMA
SECTION = "training"
CONFIG = TrainingConfig
summary = results.summary

__all__ = ["CONFIG", "SCHEMA", "SECTION", "grid", "submit", "summary", "validate"]


def _validate_blocks(training) -> None:
    """``clusters``, ``clustering`` and ``state_dropout`` against the state counts: the
    ``large`` section's dropout only where some cell is large (an experiment's ``large``
    section does not bind a grid narrowed below it)."""
    C = training.clusters
    if training.clustering not in clusters.CLUSTERINGS:
        raise ConfigError(
            "training.clustering",
            f"{training.clustering!r} is not allowed; allowed: {', '.join(clusters.CLUSTERINGS)}",
        )
    large = any(is_large(n, training.large.n_states) for n in training.n_states)
    large_dropout = training.large.state_dropout if large else 0.0
    for key, dropout in (("state_dropout", training.state_dropout),
                         ("large.state_dropout", large_dropout)):  # fmt: skip
        if dropout and not C:
            raise ConfigError(
                f"training.{key}",
                "drops states within each word cluster; it needs training.clusters > 0",
            )
    vocabulary = training.n_tokens or data.DEFAULT_VOCABULARY
    if _default_corpus(training) and C > vocabulary:
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


def _default_corpus(training) -> bool:
    return training.corpus in (None, "stdlib")


def validate(cfg) -> None:
    """Raise ``ConfigError`` naming the first invalid key of ``training``."""
    training = cfg.training
    check_list("training.n_states", training.n_states, int, "integers >= 2")
    check_list("training.parameterisations", training.parameterisations, str, PARAMETERISATIONS)
    check_list("training.seeds", training.seeds, int, "integers >= 0")
    for n in training.n_states:
        for name in training.parameterisations:
            try:
                parse(name, n)
            except ValueError as error:
                raise ConfigError("training.parameterisations", str(error)) from None
    if training.grow and any(name.startswith("banded_") for name in training.parameterisations):
        raise ConfigError(
            "training.grow",
            "cannot split a banded kernel's states; allowed with softmax, neural and kernel_<r>",
        )
    for name, most in training.max_states.items():
        if not isinstance(most, int) or most < 2:
            raise ConfigError(
                f"training.max_states.{name}", f"{most} is not allowed; allowed: integers >= 2"
            )
        try:
            parse(name, most)
        except ValueError as error:
            raise ConfigError(f"training.max_states.{name}", str(error)) from None
    _validate_blocks(training)
    large = training.large
    if large.n_states is None and (large.state_dropout or large.learning_rate is not None):
        raise ConfigError(
            "training.large.n_states",
            "is null, so training.large's state dropout and rate apply to no cell; allowed: "
            "the fewest states of a large cell (an integer >= 2)",
        )
    if _default_corpus(training):
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
    """A named or user's corpus is read here, once, so a missing or small one fails before
    any training."""
    if training.corpus not in corpora.CORPORA and not Path(training.corpus).exists():
        raise ConfigError(
            "training.corpus",
            f"{training.corpus} does not exist; allowed: {', '.join(corpora.CORPORA)} or a "
            "text file or folder",
        )
    try:
        corpus = load_corpus(training.corpus, training.n_tokens)
    except FileNotFoundError as error:
        raise ConfigError("training.corpus", str(error)) from None
    except ValueError as error:
        raise ConfigError("training.n_tokens", str(error)) from None
    for name in data.PARTS:
        if len(getattr(corpus, name)) < 2 * training.batch:
            raise ConfigError(
                "training.corpus",
                f"{training.corpus} leaves fewer than 2 x training.batch = {2 * training.batch} "
                f"{name} tokens (two per stream); give more documents (the split is by document)",
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
    client: Client, grid: TrainingGrid, cells: list[TrainingCell], *, store: Path
) -> dict[Future, list[TrainingCell]]:
    """One task per cell, a grown cell's after its parent's (``training.grow``); the future
    of each and the cells it computes."""
    folder = models_folder(store)
    tasks: dict[TrainingCell, Delayed] = {}
    for cell in sorted(cells, key=lambda c: c.n_states):  # every parent before its children
        parent = tasks.get(cell._replace(n_states=grown_from(cell, grid.settings, grid.n_states)))
        tasks[cell] = delayed(train_cell)(
            cell,
            grid.settings,
            folder,
            grid.n_states,
            *([parent] if parent is not None else []),
            dask_key_name=f"train-{'-'.join(map(str, cell))}",
        )
    futures = client.compute([tasks[cell] for cell in cells])
    return {future: [cell] for future, cell in zip(futures, cells, strict=True)}
