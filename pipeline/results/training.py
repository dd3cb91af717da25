"""The store of the training sweep: HMM language models trained over state counts,
transition parameterisations and seeds (the kernel HMMs of Chiu, Deng and Rush, *Scaling
Hidden Markov Language Models*).

A cell is one ``(n_states, parameterisation, seed)``: one model trained for ``epoch``
epochs; the grid is a full product. ``summary`` is the table a sweep prints at its end.
"""

from __future__ import annotations

import xarray as xr

from pipeline.results.base import Schema, Variable, status_variables

DIMS = ("n_states", "parameterisation", "seed")
"""The dimensions of a training cell."""
BASELINES = ("kn2", "kn3", "kn4", "kn5")
"""The ``baseline`` coordinate: interpolated Kneser-Ney n-gram models of order 2 to 5."""

VARIABLES: dict[str, Variable] = {
    "perplexity": Variable(
        (*DIMS, "epoch"), "1", "validation perplexity exp(-log evidence / tokens) after the epoch"
    ),
    "epoch_seconds": Variable(
        (*DIMS, "epoch"),
        "s",
        "wall-clock seconds of the epoch's gradient steps",
        missing="NaN at epoch 0: the perplexity before training",
    ),
    "tokens_per_second": Variable(
        DIMS, "1/s", "held-out tokens per second of the forward recursion (the evidence)"
    ),
    "n_features": Variable(DIMS, "1", "feature dimension F of the kernel (0: full softmax)"),
    "stored_parameters": Variable(DIMS, "1", "numbers the model's parameters hold"),
    "train_tokens": Variable(DIMS, "1", "training tokens per epoch"),
    "validation_tokens": Variable(DIMS, "1", "validation tokens the perplexity is measured on"),
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
        "validation perplexity of the interpolated Kneser-Ney n-gram model trained on the same "
        "chunks (the same in every cell)",
    ),
    "baseline_test_perplexity": Variable(
        (*DIMS, "baseline"),
        "1",
        "test perplexity of the interpolated Kneser-Ney n-gram model trained on the same chunks "
        "(the same in every cell)",
    ),
    **status_variables(DIMS),
}


SCHEMA = Schema(
    name="training",
    dims=DIMS,
    variables=VARIABLES,
    coordinates={
        "n_states": "number of hidden states",
        "parameterisation": "transition parameterisation (kernel_<r>: r states per feature)",
        "epoch": "epochs of training done",
        "baseline": "interpolated Kneser-Ney n-gram model of order 2 to 5 (kn<order>)",
    },
)


def summary(ds: xr.Dataset) -> str:
    """One line per cell: the final held-out perplexity and the median epoch seconds."""
    ds = ds.load()
    lines = [
        f"{'n_states':>9} {'parameterisation':>18} {'seed':>5} {'perplexity':>11} "
        f"{'epoch s':>9} {'tokens/s':>10}"
    ]
    for n in ds["n_states"].values:
        for name in ds["parameterisation"].values:
            for seed in ds["seed"].values:
                cell = ds.sel(n_states=n, parameterisation=name, seed=seed)
                if not bool(cell["done"]):
                    continue
                lines.append(
                    f"{int(n):>9} {name!s:>18} {int(seed):>5} "
                    f"{float(cell['perplexity'].isel(epoch=-1)):>11.1f} "
                    f"{float(cell['epoch_seconds'].median()):>9.2f} "
                    f"{float(cell['tokens_per_second']):>10.0f}"
                )
    return "\n".join(lines)
