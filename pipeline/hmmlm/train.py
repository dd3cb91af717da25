"""Training HMM LMs by gradient ascent on the evidence, and their held-out perplexity.

Adam (Kingma and Ba) on every parameter, with the gradient of the summed log
evidence of a batch of chunks divided by its tokens
(``pipeline.hmmlm.parameters.gradient``): the same optimiser for every
parameterisation, so epochs compare like with like.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from pipeline.hmmlm import evidence
from pipeline.hmmlm.evidence import statistics
from pipeline.hmmlm.parameters import Parameters, gradient, softmax_rows, transition_matrix


class Trained(NamedTuple):
    """A training run's result.

    parameters : the final parameters.
    perplexity : (epochs + 1,) held-out perplexity before training and after each epoch.
    epoch_seconds : (epochs,) wall-clock seconds of each epoch's updates.
    """

    parameters: Parameters
    perplexity: np.ndarray
    epoch_seconds: np.ndarray


def _leaves(tree) -> list[np.ndarray]:
    if isinstance(tree, tuple):
        return [leaf for child in tree for leaf in _leaves(child)]
    return [tree]


def _rebuild(tree, leaves: list[np.ndarray]):
    """``tree`` with its arrays replaced, in ``_leaves`` order (consumes ``leaves``)."""
    if isinstance(tree, tuple):
        return type(tree)(*(_rebuild(child, leaves) for child in tree))
    return leaves.pop(0)


def log_evidence(p: Parameters, chunks: np.ndarray, batch: int = 64) -> float:
    """``sum log P(chunk)`` over the rows of ``chunks`` (M, length), ``batch`` rows at a time."""
    prior, emission = softmax_rows(p.prior), softmax_rows(p.emission)
    T = transition_matrix(p.transition)
    return sum(
        evidence.log_evidence(prior, T, emission, chunks[k : k + batch])
        for k in range(0, len(chunks), batch)
    )


def perplexity(p: Parameters, chunks: np.ndarray) -> float:
    """``exp(-log evidence / tokens)`` of ``chunks``: each chunk starts from the prior."""
    return float(np.exp(-log_evidence(p, chunks) / chunks.size))


def train(
    p: Parameters,
    train_chunks: np.ndarray,
    held_out: np.ndarray,
    *,
    epochs: int,
    batch: int = 32,
    learning_rate: float = 0.05,
    seed: int = 0,
) -> Trained:
    """``epochs`` passes of Adam over ``train_chunks`` (M, length) in shuffled batches of
    ``batch`` chunks; the held-out perplexity after each."""
    rng = np.random.default_rng(seed)
    leaves = _leaves(p)
    first, second = [np.zeros_like(x) for x in leaves], [np.zeros_like(x) for x in leaves]
    beta1, beta2, tiny = 0.9, 0.999, 1e-8
    step = 0
    curve, seconds = [perplexity(p, held_out)], []
    for _ in range(epochs):
        start = time.perf_counter()
        order = rng.permutation(len(train_chunks))
        for k in range(0, len(order), batch):
            tokens = train_chunks[order[k : k + batch]]
            current = _rebuild(p, list(leaves))
            prior, emission = softmax_rows(current.prior), softmax_rows(current.emission)
            T = transition_matrix(current.transition)
            grads = _leaves(gradient(current, statistics(prior, T, emission, tokens), len(tokens)))
            step += 1
            for x, g, m, v in zip(leaves, grads, first, second, strict=True):
                g = g / tokens.size
                m *= beta1
                m += (1 - beta1) * g
                v *= beta2
                v += (1 - beta2) * g * g
                x += (
                    learning_rate
                    * (m / (1 - beta1**step))
                    / (np.sqrt(v / (1 - beta2**step)) + tiny)
                )
        seconds.append(time.perf_counter() - start)
        p = _rebuild(p, list(leaves))
        curve.append(perplexity(p, held_out))
    return Trained(p, np.array(curve), np.array(seconds))
