"""Trained HMM LMs on disk: one ``.npz`` file per model.

The file holds the parameters (``pipeline.hmmlm.parameters``) under these keys:

- ``kind``: ``"softmax"`` or ``"kernel"``;
- ``prior`` (n,) and ``emission`` (n, V): logits, a softmax per row;
- ``logits`` (n, n) for a softmax; ``U`` (n, d), ``V`` (n, d), ``W`` (F, d) and ``band``
  (n, 2 delta - 1) for a kernel (``band`` of width 0 without one);
- ``words`` (V,): the vocabulary, token id -> word, the last ``<unk>``.

``numpy.load`` reads it without this package; ``load`` returns the parameters, and the
``hmmlm`` model family (``pipeline.models.hmmlm``) the HMM they define.
"""

from __future__ import annotations

import os

import numpy as np

from pipeline.hmmlm.parameters import Kernel, Parameters, Softmax


def save(path: str | os.PathLike, p: Parameters, words: tuple[str, ...]) -> None:
    """Write ``p`` and its vocabulary ``words`` to ``path`` (an ``.npz`` file)."""
    t = p.transition
    arrays = {"logits": t.logits} if isinstance(t, Softmax) else t._asdict()
    kind = "softmax" if isinstance(t, Softmax) else "kernel"
    np.savez(path, kind=kind, prior=p.prior, emission=p.emission, words=np.array(words), **arrays)


def load(path: str | os.PathLike) -> tuple[Parameters, tuple[str, ...]]:
    """The parameters and vocabulary saved at ``path``."""
    with np.load(path, allow_pickle=False) as f:
        if str(f["kind"]) == "softmax":
            transition = Softmax(f["logits"])
        else:
            transition = Kernel(f["U"], f["V"], f["W"], f["band"])
        return Parameters(f["prior"], f["emission"], transition), tuple(f["words"].tolist())


def n_states(path: str | os.PathLike) -> int:
    """The number of hidden states of the model saved at ``path`` (reads only the prior)."""
    with np.load(path, allow_pickle=False) as f:
        return int(f["prior"].shape[0])
