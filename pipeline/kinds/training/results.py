"""The store of the training sweep: HMM language models trained over state counts,
transition parameterisations and seeds (the kernel HMMs of Chiu, Deng and Rush, *Scaling
Hidden Markov Language Models*, with the blocked emissions and state dropout of Chiu and
Rush 2020), beside Kneser-Ney n-gram baselines on the same split.

A cell is one ``(n_states, parameterisation, seed)``: one model trained until its
validation perplexity stops improving (or ``max_epochs``, or its time budget). The grid is
a full product except for the parameterisations above their ``max_states`` (the softmax's
n^2 logits exceed the memory, a neural model's epochs the time):
``in_grid`` over ``(n_states, parameterisation)`` marks the cells that exist.
``summary`` is the table a sweep prints at its end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from pipeline.results.schema import Record, Schema, Variable, status_variables, text_table

DIMS = ("n_states", "parameterisation", "seed")
"""The dimensions of a training cell."""
BASELINES = ("kn2", "kn3", "kn4", "kn5", "mkn2", "mkn3", "mkn4", "mkn5")
"""The ``baseline`` coordinate: interpolated (``kn<order>``) and modified (``mkn<order>``)
Kneser-Ney n-gram models of order 2 to 5."""
NGRAMS = (2, 3, 5, 8)
"""The ``ngram`` coordinate: the orders whose held-out n-grams are looked up in training."""
SPECTRUM_MAX_STATES = 2048
"""The singular values of a learned transition matrix are computed up to this many states
(a dense SVD, O(n^3))."""

STOPPED = "NaN after the epoch training stopped at (early stopping or max_epochs)"

VARIABLES: dict[str, Variable] = {
    "perplexity": Variable(
        (*DIMS, "epoch"),
        "1",
        "validation perplexity exp(-log evidence / tokens) after the epoch",
        missing=STOPPED,
    ),
    "epoch_seconds": Variable(
        (*DIMS, "epoch"),
        "s",
        "wall-clock seconds of the epoch's gradient steps",
        missing=f"NaN at epoch 0 (the perplexity before training); {STOPPED}",
        timed=True,
    ),
    "best_epoch": Variable(DIMS, "1", "the epoch of the lowest validation perplexity"),
    "test_perplexity": Variable(
        DIMS, "1", "test perplexity of the model of the best validation epoch"
    ),
    "epochs": Variable(DIMS, "1", "epochs trained before training stopped"),
    "stopped": Variable(
        DIMS,
        "1",
        "why training stopped: patience (epochs without a better validation perplexity), "
        "max_epochs, or budget (the next epoch would have ended past training.max_seconds)",
        "str",
    ),
    "grown_from": Variable(
        DIMS,
        "1",
        "the states of the trained model this one was split from (training.grow); 0: trained "
        "from a random start",
    ),
    "tokens_per_second": Variable(
        DIMS, "1/s", "test tokens per second of the forward recursion (the evidence)", timed=True
    ),
    "n_features": Variable(DIMS, "1", "feature dimension F of the kernel (0: full softmax)"),
    "stored_parameters": Variable(DIMS, "1", "numbers the model's parameters hold"),
    "training_bytes": Variable(
        DIMS,
        "B",
        "bytes of the parameters, their two Adam moments, the best epoch's copy of all three "
        "and the per-batch buffers",
    ),
    "transition_rank": Variable(
        DIMS,
        "1",
        "singular values of the learned transition matrix above 1e-5",
        missing=f"NaN above {SPECTRUM_MAX_STATES} states (a dense SVD)",
    ),
    "train_tokens": Variable(DIMS, "1", "training tokens per epoch"),
    "validation_tokens": Variable(DIMS, "1", "validation tokens the perplexity is measured on"),
    "test_tokens": Variable(DIMS, "1", "test tokens the test perplexity is measured on"),
    "vocabulary": Variable(DIMS, "1", "word types of the model, <unk> included"),
    "split": Variable(
        DIMS,
        "1",
        "which documents are in the train, validation and test parts (16 hex digits of a "
        "SHA-256; the same in every cell)",
        "str",
    ),
    "baseline_perplexity": Variable(
        (*DIMS, "baseline"),
        "1",
        "validation perplexity of the Kneser-Ney n-gram model trained on the same streams (the "
        "same in every cell)",
    ),
    "baseline_test_perplexity": Variable(
        (*DIMS, "baseline"),
        "1",
        "test perplexity of the Kneser-Ney n-gram model trained on the same streams (the same "
        "in every cell)",
    ),
    "seen_validation": Variable(
        (*DIMS, "ngram"),
        "1",
        "share of the validation streams' n-grams that occur word for word in the training "
        "streams (the same in every cell)",
    ),
    "seen_test": Variable(
        (*DIMS, "ngram"),
        "1",
        "share of the test streams' n-grams that occur word for word in the training streams "
        "(the same in every cell)",
    ),
    **status_variables(DIMS),
}


@dataclass(frozen=True)
class TrainingRecord(Record):
    """What one cell computes (``tasks.train_cell``), a field per variable of ``VARIABLES``
    (whose meaning and ``missing`` it has); E = max_epochs + 1 epochs, B baselines, G n-gram
    orders."""

    perplexity: np.ndarray  # (E,), NaN after the last epoch trained
    epoch_seconds: np.ndarray  # (E,), NaN at epoch 0 and after the last
    best_epoch: int
    test_perplexity: float
    epochs: int
    stopped: str
    grown_from: int
    tokens_per_second: float
    n_features: int
    stored_parameters: int
    training_bytes: int
    transition_rank: float  # a count, NaN above SPECTRUM_MAX_STATES
    train_tokens: int
    validation_tokens: int
    test_tokens: int
    vocabulary: int
    split: str
    baseline_perplexity: np.ndarray  # (B,)
    baseline_test_perplexity: np.ndarray  # (B,)
    seen_validation: np.ndarray  # (G,)
    seen_test: np.ndarray  # (G,)


SCHEMA = Schema(
    name="training",
    dims=DIMS,
    variables=VARIABLES,
    record=TrainingRecord,
    coordinates={
        "n_states": "number of hidden states",
        "parameterisation": "transition parameterisation (kernel_<r>: r states per feature)",
        "epoch": "epochs of training done",
        "baseline": "Kneser-Ney n-gram model of order 2 to 5, interpolated (kn<order>) or "
        "modified (mkn<order>)",
        "ngram": "n-gram order",
    },
    in_grid_dims=("n_states", "parameterisation"),
    in_grid_name="the parameterisation is trained at this size (each only up to its "
    "training.max_states)",
)


def summary(ds: xr.Dataset) -> str:
    """One line per cell done: validation and test perplexity at the best epoch, the
    epochs trained and the median epoch seconds; then the Kneser-Ney baselines."""
    ds = ds.load()
    rows = []
    for n in ds["n_states"].values:
        for name in ds["parameterisation"].values:
            for seed in ds["seed"].values:
                cell = ds.sel(n_states=n, parameterisation=name, seed=seed)
                if not bool(cell["done"]):
                    continue
                best = int(cell["best_epoch"])
                rows.append(
                    [
                        str(int(n)),
                        str(name),
                        str(int(seed)),
                        f"{float(cell['perplexity'].sel(epoch=best)):.1f}",
                        f"{float(cell['test_perplexity']):.1f}",
                        f"{best}/{int(cell['epochs'])}",
                        f"{float(cell['epoch_seconds'].median()):.2f}",
                    ]
                )
    header = [
        "n_states",
        "parameterisation",
        "seed",
        "validation",
        "test",
        "best/epochs",
        "epoch s",
    ]
    lines = [text_table(header, rows)] if rows else []
    done = ds["baseline_perplexity"].where(ds["done"])
    if bool(ds["done"].any()):
        validation = done.max(DIMS)
        test = ds["baseline_test_perplexity"].where(ds["done"]).max(DIMS)
        lines.append(
            "Kneser-Ney validation / test: "
            + ", ".join(
                f"{b} {float(validation.sel(baseline=b)):.1f} / {float(test.sel(baseline=b)):.1f}"
                for b in BASELINES
            )
        )
        seen = [ds[name].where(ds["done"]).max(DIMS) for name in ("seen_validation", "seen_test")]
        lines.append(
            "held-out n-grams seen in training, validation / test: "
            + ", ".join(
                f"{n}-grams {float(seen[0].sel(ngram=n)):.1%} / {float(seen[1].sel(ngram=n)):.1%}"
                for n in NGRAMS
            )
        )
    return "\n".join(lines)
