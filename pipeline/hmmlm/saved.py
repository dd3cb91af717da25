"""Trained HMM LMs on disk: one ``.npz`` file per model.

The file holds the parameters (``pipeline.hmmlm.parameters``) under these keys:

- ``version``: 3 (files without it are version 1: unblocked models, read the same way;
  version 2 has no neural models);
- ``kind``: ``"softmax"``, ``"kernel"`` or ``"neural"``;
- ``prior`` (n,) logits, a softmax over the states;
- ``emission``: logits, a softmax per state's row: (n, V) for an unblocked model; for a
  blocked one (``pipeline.hmmlm.clusters``) flat (k V,), cluster c's block (k, m_c) of its
  k states over its m_c words (in word-id order) at ``k * (words of clusters < c)``;
- ``cluster`` (V,) the cluster of each word, and ``states_per_cluster`` k: blocked models
  only (cluster c owns the states ``c k .. (c + 1) k - 1``, which emit only its words);
- ``logits`` (n, n) for a softmax; ``U`` (n, d), ``V`` (n, d), ``W`` (F, d) and ``band``
  (n, 2 delta - 1) for a kernel (``band`` of width 0 without one); ``E`` (n, d), ``W1``
  (d, d), ``b1`` (d,), ``W2`` (d, d), ``b2`` (d,), ``gain`` (d,) and ``bias`` (d,) for a
  neural model (``pipeline.hmmlm.neural``);
- ``words`` (V,): the vocabulary, token id -> word, the last ``<unk>``;
- optionally Adam's state where training left it (``pipeline.hmmlm.train.Adam``), for a
  run that carries on: ``adam_step``, ``adam_rate``, and the moments of each array above
  but the vocabulary's and the clusters' under its key prefixed by ``adam_first_`` and
  ``adam_second_`` (``adam_first_U``...).

``numpy.load`` reads it without this package; ``load`` returns the parameters, the
vocabulary and the blocks (None for an unblocked model), ``load_adam`` Adam's state (None
where the file has none), and the ``hmmlm`` model family (``pipeline.models.hmmlm``) the
HMM they define.
"""

from __future__ import annotations

import os

import numpy as np

from pipeline.hmmlm.clusters import Blocks, blocks_of
from pipeline.hmmlm.neural import Neural
from pipeline.hmmlm.parameters import Kernel, Parameters, Softmax, Transition
from pipeline.hmmlm.train import Adam

VERSION = 3
"""The format this module writes; it reads this one and version 1."""


def _named(p: Parameters) -> dict[str, np.ndarray]:
    """The arrays of ``p`` under their keys in the file."""
    t = p.transition
    arrays = {"logits": t.logits} if isinstance(t, Softmax) else t._asdict()
    return {"prior": p.prior, "emission": p.emission, **arrays}


def _parameters(kind: str, arrays) -> Parameters:
    """The parameters of a model of ``kind`` from its arrays by their keys."""
    if kind == "softmax":
        transition: Transition = Softmax(arrays["logits"])
    elif kind == "neural":
        transition = Neural(*(arrays[name] for name in Neural._fields))
    else:
        transition = Kernel(arrays["U"], arrays["V"], arrays["W"], arrays["band"])
    return Parameters(arrays["prior"], arrays["emission"], transition)


def save(
    path: str | os.PathLike,
    p: Parameters,
    words: tuple[str, ...],
    blocks: Blocks | None = None,
    adam: Adam | None = None,
) -> None:
    """Write ``p``, its vocabulary ``words``, its ``blocks`` (if blocked) and Adam's state
    ``adam`` (if given) to ``path``."""
    kind = {Softmax: "softmax", Kernel: "kernel", Neural: "neural"}[type(p.transition)]
    arrays = {"version": np.array(VERSION), "kind": np.array(kind), "words": np.array(words)}
    arrays |= _named(p)
    if blocks is not None:
        arrays |= {"cluster": blocks.cluster, "states_per_cluster": np.array(blocks.states)}
    if adam is not None:
        arrays |= {f"adam_first_{key}": x for key, x in _named(adam.first).items()}
        arrays |= {f"adam_second_{key}": x for key, x in _named(adam.second).items()}
        arrays |= {"adam_step": np.array(adam.step), "adam_rate": np.array(adam.rate)}
    np.savez(path, allow_pickle=False, **arrays)


def load(path: str | os.PathLike) -> tuple[Parameters, tuple[str, ...], Blocks | None]:
    """The parameters, vocabulary and blocks (None: unblocked) saved at ``path``.

    Raises ``ValueError`` (one line) for a file of a format newer than ``VERSION``.
    """
    with np.load(path, allow_pickle=False) as f:
        version = int(f["version"]) if "version" in f else 1
        if version > VERSION:
            raise ValueError(
                f"{path} is an HMM LM of format {version}; this pipeline reads formats 1 to "
                f"{VERSION}: update the pipeline"
            )
        blocks = blocks_of(f["cluster"], int(f["states_per_cluster"])) if "cluster" in f else None
        parameters = _parameters(str(f["kind"]), f)
        return parameters, tuple(f["words"].tolist()), blocks


def load_adam(path: str | os.PathLike) -> Adam | None:
    """Adam's state saved with the model at ``path``; None where the file has none."""
    with np.load(path, allow_pickle=False) as f:
        if "adam_step" not in f:
            return None
        kind = str(f["kind"])

        def moments(prefix: str) -> Parameters:
            named = {key.removeprefix(prefix): f[key] for key in f.files if key.startswith(prefix)}
            return _parameters(kind, named)

        first, second = moments("adam_first_"), moments("adam_second_")
        return Adam(first, second, int(f["adam_step"]), float(f["adam_rate"]))


def n_states(path: str | os.PathLike) -> int:
    """The number of hidden states of the model saved at ``path`` (reads only the prior)."""
    with np.load(path, allow_pickle=False) as f:
        return int(f["prior"].shape[0])
