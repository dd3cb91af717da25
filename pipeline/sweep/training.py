"""The training sweep (seed 002): HMM LMs over state counts, parameterisations and seeds.

``python -m pipeline.sweep experiment=lm_scaling`` (or any config with a
``training`` section) trains one HMM LM per cell ``(n_states,
parameterisation, seed)`` as a Dask task (``train_cell``) and stores, per
cell, the held-out perplexity after every epoch, the seconds of every epoch
and the tokens per second of inference, in a zarr store with the same resume,
progress and failure handling as the approximation sweep (``ResultStore``).
Each trained model is saved next to the store, in ``<store name>_models/``
(``<n_states>-<parameterisation>-<seed>.npz``), where the ``hmmlm`` model family
reads it.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import xarray as xr
from distributed import Client, Future
from omegaconf import OmegaConf

from pipeline.hmmlm import data, evidence, saved
from pipeline.hmmlm.parameters import initial, parse, softmax_rows, transition_matrix
from pipeline.hmmlm.train import train
from pipeline.sweep.plan import Values, submit_each
from pipeline.sweep.store import ResultStore, Variable, kind_template, status_variables

KIND = "training"
"""The store attribute ``kind`` of a training sweep's store."""

DIMS = ("n_states", "parameterisation", "seed")
"""The dimensions of a training cell."""


class TrainingCell(NamedTuple):
    n_states: int
    parameterisation: str
    seed: int


@dataclass(frozen=True)
class TrainingGrid:
    """The cells of a validated config's ``training`` section and what every cell shares."""

    n_states: tuple[int, ...]
    parameterisations: tuple[str, ...]
    seeds: tuple[int, ...]
    settings: dict
    """Every other key of ``training`` (epochs, batch, length, ...)."""

    DIMS = DIMS

    @classmethod
    def from_config(cls, cfg) -> TrainingGrid:
        training = OmegaConf.to_container(cfg.training, resolve=True)
        return cls(
            n_states=tuple(sorted(training.pop("n_states"))),
            parameterisations=tuple(training.pop("parameterisations")),
            seeds=tuple(sorted(training.pop("seeds"))),
            settings=training,
        )

    def coords(self) -> dict[str, np.ndarray]:
        return {
            "n_states": np.array(self.n_states, dtype=np.int64),
            "parameterisation": np.array(self.parameterisations, dtype=object),
            "seed": np.array(self.seeds, dtype=np.int64),
            "epoch": np.arange(self.settings["epochs"] + 1),
        }

    def cells(self) -> list[TrainingCell]:
        """Every cell, largest models first (they take longest)."""
        return [
            TrainingCell(n, name, seed)
            for n in reversed(self.n_states)
            for name in self.parameterisations
            for seed in self.seeds
        ]

    def index(self, cell: TrainingCell) -> tuple[int, ...]:
        return (
            self.n_states.index(cell.n_states),
            self.parameterisations.index(cell.parameterisation),
            self.seeds.index(cell.seed),
        )

    def fingerprint(self) -> str:
        return json.dumps(
            {
                "kind": KIND,
                "n_states": self.n_states,
                "parameterisations": self.parameterisations,
                "seeds": self.seeds,
                **self.settings,
            },
            sort_keys=True,
        )


VARIABLES: dict[str, Variable] = {
    "perplexity": Variable(
        (*DIMS, "epoch"), "1", "held-out perplexity exp(-log evidence / tokens) after the epoch"
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
    **status_variables(DIMS),
}


def _template(grid: TrainingGrid, attrs: dict) -> tuple[xr.Dataset, dict]:
    return kind_template(
        grid,
        VARIABLES,
        attrs,
        kind=KIND,
        long_names={
            "n_states": "number of hidden states",
            "parameterisation": "transition parameterisation (kernel_<r>: r states per feature)",
            "epoch": "epochs of training done",
        },
    )


class TrainingStore(ResultStore):
    """The store of a training sweep (``ResultStore`` with this module's variables)."""

    variables = VARIABLES
    template = staticmethod(_template)


@functools.cache
def _corpus(corpus: str | None, n_tokens: int, length: int) -> data.Corpus:
    """The corpus as chunks, read once per worker process."""
    return data.load(corpus, n_tokens, length)


def model_file(folder: Path, cell: TrainingCell) -> Path:
    """Where the model of ``cell`` is saved in ``folder``."""
    return folder / f"{cell.n_states}-{cell.parameterisation}-{cell.seed}.npz"


def train_cell(cell: TrainingCell, settings: dict, models: Path | None = None) -> Values:
    """Train one HMM LM and measure it (``settings``: the ``training`` section's keys); save
    the trained model in the folder ``models`` (``pipeline.hmmlm.saved``) if given."""
    corpus = _corpus(settings["corpus"], settings["n_tokens"], settings["length"])
    chunks = corpus.train[: settings["train_chunks"]]
    held_out = corpus.held_out[: settings["held_out_chunks"]]
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
        }
    )


def submit(
    client: Client,
    grid: TrainingGrid,
    cells: list[TrainingCell],
    *,
    retries: int,
    models: Path | None = None,
) -> dict[Future, list[TrainingCell]]:
    """One task per cell; the future of each and the cells it computes. ``models``: the
    folder (seen alike by every worker) the trained models are saved in."""
    return submit_each(
        client, train_cell, cells, grid.settings, models, prefix="train", retries=retries
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
