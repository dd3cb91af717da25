"""A trained HMM language model (Chiu, Deng, Rush, "Scaling Hidden Markov Language
Models") as a model family: ``hmmlm``.

``build_model("hmmlm", n, path=...)`` reads a model saved by the training sweep
(``python -m pipeline.sweep experiment=lm_scaling`` writes one ``.npz`` per cell,
format in ``pipeline.hmmlm.saved``): hidden states, not words, with the
transitions of its parameterisation (dense for the full softmax, ``LowRank`` for
a kernel, with its band) and emissions over its vocabulary: dense, or for a blocked
model a CSR matrix whose rows are exactly zero outside the state's word cluster (the
model the training scored). Parameters saved in float32 are read as float64. Every method
then runs on it: top-p, top-k or low-rank on a trained HMM LM is the top-p
paper's "LM HMM" done the way it describes it. ``n_states`` must be the saved
model's. The family has no randomness: ``seed`` is ignored.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.hmm import HMM
from pipeline.hmmlm import saved
from pipeline.hmmlm.blocks import emission_matrix, emission_probabilities
from pipeline.hmmlm.parameters import softmax_rows, transition_matrix
from pipeline.models import kernel
from pipeline.models.family import ParameterError

SEEDED = False

GAMMA_EXACT_MAX_STATES = kernel.GAMMA_EXACT_MAX_STATES
"""A kernel model's exact minimal mixing rate materialises its matrix (as for ``kernel``)."""


def size(*, path: str | None = None) -> int:
    """The number of states of the model saved at ``path``; ``ParameterError`` if none is."""
    if path is None:
        raise ParameterError(
            "path", "the hmmlm family needs path= a model saved by the training sweep"
        )
    if not Path(path).is_file():
        raise ParameterError("path", f"the hmmlm family's path {path} is not a file")
    try:
        saved_states = saved.n_states(path)
    except Exception as error:  # whatever numpy raises for a file that is no such .npz
        raise ParameterError(
            "path",
            f"the hmmlm family's path {path} is not a model saved by the training sweep "
            f"({type(error).__name__})",
        ) from None
    return saved_states


def check(n_states: int, *, path: str | None = None) -> None:
    """Raise ``ParameterError`` unless ``path`` names a saved model of ``n_states`` states."""
    saved_states = size(path=path)
    if saved_states != n_states:
        raise ParameterError(
            "n_states", f"{path} holds a model of {saved_states} states, not n_states={n_states}"
        )


def build(n_states: int, seed: int = 0, *, path: str | None = None) -> HMM:
    """The HMM of the model saved at ``path`` (``seed`` is ignored)."""
    check(n_states, path=path)
    assert path is not None, "check refuses a missing path"
    p, _, blocks = saved.load(path)
    p = p._replace(
        prior=p.prior.astype(np.float64),
        emission=p.emission.astype(np.float64),
        transition=type(p.transition)(*(x.astype(np.float64) for x in p.transition)),
    )
    if blocks is None:
        emission = softmax_rows(p.emission)
    else:
        emission = emission_matrix(emission_probabilities(p.emission, blocks), blocks)
    return HMM(softmax_rows(p.prior), transition_matrix(p.transition), emission)
