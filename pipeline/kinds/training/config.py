"""The training kind's settings: the ``training`` section, every field's meaning in its
docstring (``--help``, the reference), the numbers' ranges declared on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from pipeline.corpus import CORPORA
from pipeline.hmmlm.clusters import CLUSTERINGS
from pipeline.hmmlm.parameters import PARAMETERISATIONS
from pipeline.sweep.config.validation import choices, ranged


@dataclass
class LargeConfig:
    """The state dropout and rate of the largest cells, in place of the section's: a model
    grown to many states from a trained one (``grow``) may improve on its start only at a
    smaller rate with state dropout, where a smaller model learns best without (reports/lm)."""

    n_states: Optional[int] = ranged(None, least=2)  # noqa: UP045
    """The fewest states of a large cell; null: no cell is large (the keys below unused)."""
    state_dropout: float = ranged(0.0, least=0, most=1, below=True)
    """A large cell's state dropout, in place of ``training.state_dropout``."""
    learning_rate: Optional[float] = ranged(None, least=0, above=True)  # noqa: UP045
    """A large cell's Adam step size, in place of ``training.learning_rate``; null: that."""


def is_large(n_states: int, fewest: int | None) -> bool:
    """Whether a cell of ``n_states`` trains with ``training.large``'s settings, ``fewest``
    its ``n_states`` (None: no cell does)."""
    return fewest is not None and n_states >= fewest


@dataclass
class TrainingConfig:
    """A training sweep of HMM language models (the kernel HMMs of Chiu, Deng and Rush,
    with the blocked emissions, neural transitions and state dropout of Chiu and Rush 2020):
    each (n_states, parameterisation, seed) is a cell that trains one model
    (``pipeline.hmmlm``) and stores its validation and test perplexity
    (``pipeline.kinds.training``)."""

    n_states: list[int] = ranged(lambda: [256], least=2)
    """Hidden states of the trained models, one cell each (with ``clusters``, a multiple of
    the clusters)."""
    parameterisations: list[str] = choices(lambda: ["softmax"], f"a list of {PARAMETERISATIONS}")
    """``softmax``, ``neural`` (embeddings through a residual MLP, dot-product logits),
    ``kernel_<r>`` or ``banded_kernel_<r>`` (r states per feature)."""
    seeds: list[int] = ranged(lambda: [0], least=0)
    """Seeds of each model's random start, its state dropout and a ``random`` word clustering,
    one cell each."""
    max_epochs: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """Train at most this many epochs (null: 20)."""
    patience: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """Stop after this many epochs in a row without a lower validation perplexity; null:
    train ``max_epochs`` epochs."""
    max_seconds: Optional[float] = ranged(None, least=0, above=True)  # noqa: UP045
    """Each cell's time budget: no epoch starts that would end past this many seconds of
    training (as long as the last epoch took); null: none."""
    clusters: int = ranged(0, least=0)
    """Word clusters C of the blocked emissions (each owns n_states / C states, which emit
    only its words); 0: no blocks, every state emits every word."""
    clustering: str = choices("exchange", CLUSTERINGS)
    """How the training words are clustered: ``exchange`` (Brown et al.'s class-bigram
    objective, by the exchange algorithm) or ``random`` (a random equal partition)."""
    state_dropout: float = ranged(0.0, least=0, most=1, below=True)
    """Fraction of each cluster's states dropped per batch (0: none); needs clusters > 0."""
    max_states: dict[str, int] = field(default_factory=lambda: {"softmax": 16384})
    """Per parameterisation, the most states it is trained at (one not named: every size).
    The softmax's n^2 logits, two Adam moments, gradient and best copies are about 7 n^2
    float32 numbers (28 GiB at 32768 states); a neural model's epoch grows as n^2 d."""
    batch: int = ranged(32, least=1)
    """Parallel streams the training tokens are cut into (and the held-out tokens, for
    evaluation); a batch is one segment of each."""
    length: int = ranged(64, least=1)
    """Tokens per segment; each stream's state is carried from one segment to the next."""
    n_tokens: Optional[int] = ranged(None, least=2)  # noqa: UP045
    """Vocabulary size: the ``n_tokens - 1`` most frequent words seen at least twice in the
    training part, then ``<unk>`` for every other; default all words seen twice."""
    train_chunks: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """Train on the first this many ``length``-token chunks of the training part (default
    all)."""
    held_out_chunks: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """Measure perplexity on the first this many ``length``-token chunks of the validation
    (and test) part (default all)."""
    learning_rate: float = ranged(0.05, least=0, above=True)
    """Adam's step size."""
    lr_decay: float = ranged(1.0, least=0, most=1, above=True)
    """After ``lr_patience`` epochs without a lower validation perplexity, restore the best
    epoch's parameters (Adam restarted) and multiply the learning rate by this; 1: keep the
    rate and the parameters."""
    lr_patience: int = ranged(1, least=1)
    """Epochs in a row without a lower validation perplexity before each ``lr_decay``."""
    clip: Optional[float] = ranged(5.0, least=0, above=True)  # noqa: UP045
    """The largest norm of a step's gradient (per token); null: no clipping."""
    dim: int = ranged(32, least=1)
    """Embedding dimension of the kernel and neural parameterisations."""
    delta: int = ranged(3, least=1)
    """Band of the banded kernels: ``|i - j| < delta``."""
    max_features: Optional[int] = ranged(None, least=1)  # noqa: UP045
    """The kernels' features F at most: ``kernel_<r>`` has min(n_states / r, this); null:
    n_states / r."""
    grow: bool = False
    """Start each cell whose half is in ``n_states`` from that cell's trained model, every
    state split in two (the evidence unchanged), instead of a random start."""
    large: LargeConfig = field(default_factory=LargeConfig)
    """The cells of at least ``large.n_states`` states: their state dropout and rate."""
    threads: int = ranged(1, least=1)
    """numba and BLAS threads of each cell (one per worker: ``cluster.n_workers`` x this
    should be the cores)."""
    corpus: Optional[str] = choices(  # noqa: UP045
        None, f"{', '.join(CORPORA)}, a text file's or folder's path, or null"
    )
    """``stdlib`` (the default: the standard library's English), ``austen`` (fetched once
    by ``python -m pipeline.corpus fetch austen``), or a text file or folder."""
