"""What a worker of the training sweep runs: ``train_cell`` trains one HMM LM and measures it
against the Kneser-Ney baselines of the same split (shared once per worker process)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from pipeline.hmmlm import clusters, data, ngram, saved
from pipeline.hmmlm.parameters import Kernel, Parameters, initial, parse, transition_matrix
from pipeline.hmmlm.split import split, split_adam
from pipeline.hmmlm.train import Adam, Schedule, perplexity, train
from pipeline.kinds.training import results
from pipeline.kinds.training.grid import Settings, TrainingCell
from pipeline.kinds.training.results import TrainingRecord
from pipeline.operators import toarray
from pipeline.sweep.progress import cell_says
from pipeline.sweep.timing import once

SPLIT_NOISE = 0.01
"""The noise on a grown model's copied states (``pipeline.hmmlm.split``): small against
the parameters' scale (order one), enough to let the copies' gradients differ."""


@functools.cache
def load_corpus(corpus: str | None, n_tokens: int | None) -> data.Corpus:
    """The corpus as word ids, read once per worker process."""
    return data.load(corpus, n_tokens)


def _parts(corpus: data.Corpus, settings: Settings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The training, validation and test streams a sweep uses, ``batch`` of each
    (``train_chunks`` and ``held_out_chunks`` keep the first that many chunks of ``length``
    tokens of each part)."""
    length, count = settings.length, settings.batch

    def tokens(chunks: int | None) -> int | None:
        return None if chunks is None else chunks * length

    return (
        data.streams(corpus.train, count, tokens(settings.train_chunks)),
        data.streams(corpus.validation, count, tokens(settings.held_out_chunks)),
        data.streams(corpus.test, count, tokens(settings.held_out_chunks)),
    )


class Shared:
    """What every cell of a sweep shares (``shared``): the corpus, its streams, each
    Kneser-Ney baseline's validation and test perplexity (``results.BASELINES``) and the
    share of held-out n-grams seen in training (validation, test) per ``results.NGRAMS``."""

    def __init__(self, settings: Settings) -> None:
        self.corpus = load_corpus(settings.corpus, settings.n_tokens)
        self.train, self.validation, self.test = _parts(self.corpus, settings)
        scores = np.empty((2, len(results.BASELINES)))
        for k, name in enumerate(results.BASELINES):
            order, modified = int(name[-1]), name.startswith("mkn")
            model = ngram.fit(self.train, order, len(self.corpus.words), modified)
            scores[:, k] = (
                ngram.perplexity(model, self.validation),
                ngram.perplexity(model, self.test),
            )
        self.baseline, self.baseline_test = scores
        self.seen = np.array(
            [
                [data.seen_share(self.train, held_out, order) for order in results.NGRAMS]
                for held_out in (self.validation, self.test)
            ]
        )


@functools.cache
def shared(settings_key: str) -> Shared:
    """The ``Shared`` of a sweep, once per worker process (``settings_key``:
    ``Settings.key``)."""
    return Shared(Settings(**json.loads(settings_key)))


@functools.cache
def _word_clusters(settings_key: str, seed: int) -> np.ndarray:
    """The word clusters of a sweep's training streams (the random partition per seed)."""
    settings = Settings(**json.loads(settings_key))
    common = shared(settings_key)
    name = settings.clustering
    return clusters.clustering(
        name,
        common.train,
        len(common.corpus.words),
        settings.clusters,
        seed if name == "random" else 0,
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


def grown_from(cell: TrainingCell, settings: Settings, n_states: tuple[int, ...]) -> int:
    """The state count of the model ``cell`` grows from (``training.grow``: half its own,
    if in the grid and, for a kernel, of the same features F: splitting keeps F), 0 for a
    cell trained from a random start."""
    half, cap = cell.n_states // 2, settings.max_features
    if not settings.grow or half not in n_states:
        return 0
    features = (parse(cell.parameterisation, n, cap)[1] for n in (half, cell.n_states))
    return half if len(set(features)) == 1 else 0


def _start(
    cell: TrainingCell, settings: Settings, V: int, blocks, models: Path | None, parent: int
) -> tuple[Parameters, Adam | None]:
    """The starting parameters of ``cell`` and the Adam state it carries on from: random
    (None), or the trained model of ``parent`` states split with the Adam state it was saved
    with, if any (``pipeline.hmmlm.split``)."""
    if parent:
        if models is None:
            raise ValueError(f"cell {cell} grows from a saved model; it needs the models folder")
        path = model_file(models, cell._replace(n_states=parent))
        p, _, parent_blocks = saved.load(path)
        adam = saved.load_adam(path)
        rng = np.random.default_rng(cell.seed)
        grown = split(p, parent_blocks, noise=SPLIT_NOISE, rng=rng)[0]
        return grown, None if adam is None else split_adam(adam, parent_blocks)
    kind, n_features, banded = parse(cell.parameterisation, cell.n_states, settings.max_features)
    return initial(
        kind,
        cell.n_states,
        V,
        n_features=n_features,
        delta=settings.delta if banded else 0,
        dim=settings.dim,
        seed=cell.seed,
        emission_size=None if blocks is None else blocks.states * V,
        dtype=np.float64 if blocks is None else np.float32,
    ), None


def train_cell(
    cell: TrainingCell,
    settings: Settings,
    models: Path | None = None,
    n_states: tuple[int, ...] = (),
    *after,
) -> TrainingRecord:
    """Train one HMM LM and measure it (``settings``: the ``training`` section's keys); save
    the trained model in the folder ``models`` (``pipeline.hmmlm.saved``) if given.
    ``n_states`` is the grid's (a grown cell's parent is in it); ``after``: the tasks this
    one waits for (its parent's, unused)."""
    threads = settings.threads
    # numba's config sets its attributes when it reads the environment: no stub has them
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    with threadpool_limits(limits=threads, user_api="blas"):
        return _train_cell(cell, settings, models, n_states)


def _train_cell(
    cell: TrainingCell, settings: Settings, models: Path | None, n_states
) -> TrainingRecord:
    key = settings.key()
    common = shared(key)
    V, C = len(common.corpus.words), settings.clusters
    blocks = clusters.blocks_of(_word_clusters(key, cell.seed), cell.n_states // C) if C else None
    parent = grown_from(cell, settings, n_states)
    start, adam = _start(cell, settings, V, blocks, models, parent)
    schedule = Schedule(
        settings.max_epochs,
        settings.patience,
        settings.length,
        settings.learning_rate_at(cell.n_states),
        settings.lr_decay,
        settings.lr_patience,
        settings.clip,
        settings.max_seconds,
    )
    result = train(
        start,
        common.train,
        common.validation,
        schedule,
        blocks=blocks,
        state_dropout=settings.state_dropout_at(cell.n_states),
        seed=cell.seed,
        continued=bool(parent),
        adam=adam,
        on_epoch=lambda epoch, ppl: cell_says(
            f"{cell.parameterisation} n={cell.n_states} seed {cell.seed}",
            f"epoch {epoch}/{settings.max_epochs}, validation perplexity {ppl:.5g}",
        ),
    )
    p = result.parameters
    if models is not None:
        models.mkdir(parents=True, exist_ok=True)
        saved.save(model_file(models, cell), p, common.corpus.words, blocks, result.adam)
    test_perplexity, seconds = once(lambda: perplexity(p, common.test, blocks))
    length = settings.max_epochs + 1
    leaves = [p.prior, p.emission, *p.transition]
    features = p.transition.W.shape[0] if isinstance(p.transition, Kernel) else 0
    return TrainingRecord(
        perplexity=_padded(result.perplexity, length),
        epoch_seconds=_padded(result.epoch_seconds, length, head=np.nan),
        best_epoch=result.best_epoch,
        test_perplexity=test_perplexity,
        epochs=len(result.epoch_seconds),
        stopped=result.stopped,
        grown_from=parent,
        tokens_per_second=common.test.size / seconds,
        n_features=features,
        stored_parameters=sum(leaf.size for leaf in leaves),
        training_bytes=result.training_bytes,
        transition_rank=_transition_rank(p, cell.n_states),
        train_tokens=common.train.size,
        validation_tokens=common.validation.size,
        test_tokens=common.test.size,
        vocabulary=V,
        split=common.corpus.split,
        baseline_perplexity=common.baseline,
        baseline_test_perplexity=common.baseline_test,
        seen_validation=common.seen[0],
        seen_test=common.seen[1],
    )
