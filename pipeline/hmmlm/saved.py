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
- ``words`` (V,): the vocabulary, token id -> word, the last ``<unk>``.

``numpy.load`` reads it without this package; ``load`` returns the parameters, the
vocabulary and the blocks (None for an unblocked model), and the ``hmmlm`` model family
(``pipeline.models.hmmlm``) the HMM they define.
"""

from __future__ import annotations

import os

import numpy as np

from pipeline.hmmlm.clusters import Blocks, blocks_of
from pipeline.hmmlm.neural import Neural
from pipeline.hmmlm.parameters import Kernel, Parameters, Softmax, Transition

VERSION = 3
"""The format this module writes; it reads this one and version 1."""


def save(
    path: str | os.PathLike, p: Parameters, words: tuple[str, ...], blocks: Blocks | None = None
) -> None:
    """Write ``p``, its vocabulary ``words`` and its ``blocks`` (if blocked) to ``path``."""
    t = p.transition
    arrays = {"logits": t.logits} if isinstance(t, Softmax) else t._asdict()
    if blocks is not None:
        arrays |= {"cluster": blocks.cluster, "states_per_cluster": blocks.states}
    kind = {Softmax: "softmax", Kernel: "kernel", Neural: "neural"}[type(t)]
    np.savez(
        path,
        version=VERSION,
        kind=kind,
        prior=p.prior,
        emission=p.emission,
        words=np.array(words),
        **arrays,
    )


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
        if str(f["kind"]) == "softmax":
            transition: Transition = Softmax(f["logits"])
        elif str(f["kind"]) == "neural":
            transition = Neural(*(f[name] for name in Neural._fields))
        else:
            transition = Kernel(f["U"], f["V"], f["W"], f["band"])
        blocks = blocks_of(f["cluster"], int(f["states_per_cluster"])) if "cluster" in f else None
        parameters = Parameters(f["prior"], f["emission"], transition)
        return parameters, tuple(f["words"].tolist()), blocks


def n_states(path: str | os.PathLike) -> int:
    """The number of hidden states of the model saved at ``path`` (reads only the prior)."""
    with np.load(path, allow_pickle=False) as f:
        return int(f["prior"].shape[0])
