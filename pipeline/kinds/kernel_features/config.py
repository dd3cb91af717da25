"""The kernel-features kind's settings: the ``kernel_features`` section, every field's
meaning in its docstring (``--help``, the reference), the numbers' ranges declared on it."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.hmmlm.feature_maps import FEATURE_MAPS
from pipeline.sweep.config.validation import choices, ranged


@dataclass
class KernelFeaturesConfig:
    """How many random features a softmax needs (Chiu, Deng and Rush, Section 6): each
    (n_states, temperature, feature_map) is a cell that measures the TV between sampled
    softmax rows and kernel rows at every feature count
    (``pipeline.kinds.kernel_features``)."""

    n_states: list[int] = ranged(lambda: [256, 1024, 4096, 16384, 65536], least=2)
    """State counts n of the softmax rows, one cell each."""
    n_features: list[int] = ranged(lambda: [2**k for k in range(4, 13)], least=2)
    """Feature counts F (even): the first F features of one map of the largest count."""
    temperatures: list[float] = ranged(lambda: [0.5, 1.0, 2.0, 4.0], least=0, above=True)
    """The logits u.v have standard deviation 1 / temperature (lower: more separated)."""
    feature_maps: list[str] = choices(lambda: ["positive", "fourier"], FEATURE_MAPS)
    """Random feature maps, one cell each (``pipeline.hmmlm.feature_maps``): ``positive``,
    ``phi(u) = exp(Wu - |u|^2 / 2)`` (Chiu, Deng and Rush), or ``fourier``, random Fourier
    features."""
    dim: int = ranged(16, least=1)
    """Embedding dimension d."""
    rows: int = ranged(32, least=1)
    """Rows sampled per cell (every row up to that many states)."""
    seed: int = ranged(0, least=0)
    """Seed of the embeddings, the sampled rows and the feature maps of every cell (mixed with
    its n_states, temperature and map)."""
    threshold: float = ranged(0.05, least=0, most=1, above=True, below=True)
    """The median row TV the report asks the feature count for."""
