"""Growing an HMM LM by state splitting: 2n states from a trained model of n.

Every state is duplicated: its copies keep its emissions, its prior logit and its
transition parameters (a softmax's logits row and column, a kernel's embeddings ``u`` and
``v``, a neural model's embedding ``e``). Each copy's prior and each transition into a
copy then get half the original's probability (the softmax over two equal logits, the
kernel's normaliser over two equal columns), while the transitions out of the two copies
are the original's: the chain lumped over the copies is the original chain, so the
evidence of every sequence is unchanged. A blocked model's cluster of k states becomes
one of 2k: its state i becomes states i and k + i.

The copies would receive equal gradients and stay equal; ``noise`` (the standard
deviation of Gaussian noise added to the copies' emission logits and transition
parameters) breaks the tie for the training that follows. A banded kernel is not split:
its band is defined on the states' order, which splitting changes.

Training carries on from Adam's state split the same way (``split_adam``). Each copy is
half as probable as its original wherever the original was, so the gradient of a
parameter of a copy is half its original's along each of the parameter's state axes (a
prior or emission logit, a row of ``U``, ``V`` or ``E``: one; a softmax logit: two), and
that of a shared parameter (``W``, the MLP's) is unchanged: the first moment is halved and
the second quartered per state axis, so that each copy's Adam step ``m / sqrt(v)`` is its
original's.
"""

from __future__ import annotations

import numpy as np

from pipeline.hmmlm.clusters import Blocks
from pipeline.hmmlm.neural import Neural
from pipeline.hmmlm.parameters import Kernel, Parameters, Softmax, Transition
from pipeline.hmmlm.train import Adam


def sources(n_states: int, blocks: Blocks | None) -> np.ndarray:
    """The state (n,) each of the 2n split states copies: state i of cluster c of k states
    becomes states i and k + i of that cluster (of 2k); unblocked, state i becomes i and
    n + i."""
    if blocks is None:
        return np.tile(np.arange(n_states), 2)
    k, C = blocks.states, blocks.n_clusters
    return (np.arange(C)[:, None] * k + np.tile(np.arange(k), 2)[None, :]).ravel()


def _emission(emission: np.ndarray, blocks: Blocks | None) -> np.ndarray:
    if blocks is None:
        return np.tile(emission, (2, 1))
    k = blocks.states
    parts = []
    for c in range(blocks.n_clusters):
        block = emission[k * blocks.starts[c] : k * blocks.starts[c + 1]].reshape(k, -1)
        parts.append(np.tile(block, (2, 1)).ravel())
    return np.concatenate(parts)


def split(
    p: Parameters,
    blocks: Blocks | None = None,
    *,
    noise: float = 0.0,
    rng: np.random.Generator | None = None,
) -> tuple[Parameters, Blocks | None]:
    """The parameters of 2n states with the evidence of ``p`` (n states), plus ``noise``
    (the module's docstring), and the blocks of 2k states per cluster (None: unblocked)."""
    t = p.transition
    if isinstance(t, Kernel) and t.band.shape[1]:
        raise ValueError("a banded kernel cannot be split (its band follows the states' order)")
    source = sources(len(p.prior), blocks)
    rng = rng or np.random.default_rng(0)

    def copies(x: np.ndarray, *index) -> np.ndarray:
        """``x`` at the split states' sources, plus the noise."""
        grown = x[np.ix_(*index)] if len(index) > 1 else x[index[0]]
        return (
            (grown + noise * rng.standard_normal(grown.shape)).astype(x.dtype) if noise else grown
        )

    if isinstance(t, Softmax):
        transition: Transition = Softmax(copies(t.logits, source, source))
    elif isinstance(t, Neural):
        transition = t._replace(E=copies(t.E, source))
    else:
        transition = t._replace(U=copies(t.U, source), V=copies(t.V, source), band=t.band[source])
    emission = _emission(p.emission, blocks)
    if noise:
        emission = (emission + noise * rng.standard_normal(emission.shape)).astype(emission.dtype)
    grown = Parameters(p.prior[source], emission, transition)
    return grown, None if blocks is None else blocks._replace(states=2 * blocks.states)


def _per_state_axis(p: Parameters, blocks: Blocks | None, factor: float) -> Parameters:
    """``p`` split (no noise), each array times ``factor`` per state axis it has."""
    grown, _ = split(p, blocks)
    t = grown.transition
    if isinstance(t, Softmax):
        transition: Transition = Softmax(t.logits * t.logits.dtype.type(factor**2))
    elif isinstance(t, Neural):
        transition = t._replace(E=t.E * t.E.dtype.type(factor))
    else:
        transition = t._replace(U=t.U * t.U.dtype.type(factor), V=t.V * t.V.dtype.type(factor))
    scale = grown.prior.dtype.type(factor)
    return Parameters(grown.prior * scale, grown.emission * scale, transition)


def split_adam(adam: Adam, blocks: Blocks | None = None) -> Adam:
    """Adam's state for the model ``split`` makes of the model it was left at (the module's
    docstring): the same step count and rate."""
    return adam._replace(
        first=_per_state_axis(adam.first, blocks, 0.5),
        second=_per_state_axis(adam.second, blocks, 0.25),
    )
