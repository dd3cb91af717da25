"""Random models for the contract suites: row-stochastic matrices and dense HMMs drawn from
a seed, with exact zeros where asked."""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM


def random_stochastic(
    rng: np.random.Generator, rows: int, columns: int, zeros: float = 0.0
) -> np.ndarray:
    """A row-stochastic matrix (rows, columns) with about a fraction ``zeros`` of exact zeros
    (never a zero row)."""
    matrix = rng.random((rows, columns))
    matrix[rng.random((rows, columns)) < zeros] = 0.0
    matrix[np.arange(rows), rng.integers(0, columns, rows)] += 0.1
    return matrix / matrix.sum(axis=1, keepdims=True)


def random_hmm(seed: int, n: int, m: int, zeros: float = 0.0) -> HMM:
    """A dense HMM of ``n`` states and ``m`` symbols with random rows (about a fraction
    ``zeros`` of exact zeros)."""
    rng = np.random.default_rng(seed)
    return HMM(
        random_stochastic(rng, 1, n, zeros)[0],
        random_stochastic(rng, n, n, zeros),
        random_stochastic(rng, n, m, zeros),
    )
