"""Helpers shared by the tests."""

import numpy as np


def random_stochastic(rng: np.random.Generator, rows: int, columns: int, zeros: float = 0.0):
    """A row-stochastic matrix with about a fraction ``zeros`` of exact zeros (never a zero row)."""
    matrix = rng.random((rows, columns))
    matrix[rng.random((rows, columns)) < zeros] = 0.0
    matrix[np.arange(rows), rng.integers(0, columns, rows)] += 0.1
    return matrix / matrix.sum(axis=1, keepdims=True)
