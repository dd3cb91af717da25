"""Helpers shared by the library's tests: random models, brute-force references, trees of
arrays, stores' values, corpora and the README's commands. Nothing here imports Hydra or
starts a process: the sweep's helpers are in ``sweeping``."""

import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from inference import brute_force

from pipeline.hmmlm.data import part
from pipeline.kernels.select import TOLERANCE
from pipeline.kinds.methods.results import MEASURED
from pipeline.operators import LowRank, SparsePlusRankOne, entry_rows

# --- random models -------------------------------------------------------------------------


def random_structured(seed, n, m, constant_v=True, density=0.2) -> SparsePlusRankOne:
    """A row-stochastic S + outer(u, v) with non-negative S."""
    rng = np.random.default_rng(seed)
    S = sp.random_array((n, m), density=density, rng=rng, format="csr")
    v = np.ones(m) if constant_v else rng.random(m) + 0.1
    u = rng.random(n) * 0.5 / v.sum()
    S = sp.diags_array((1 - u * v.sum()) / np.maximum(S.sum(axis=1), 1e-300)) @ S
    empty = np.asarray(S.sum(axis=1)).ravel() == 0  # rows without entries: all background
    u[empty] = 1 / v.sum()
    return SparsePlusRankOne(sp.csr_array(S), u, v)


def random_low_rank(seed, n, m, rank=4, delta=0, zeros=0.0) -> LowRank:
    """A row-stochastic ``LowRank`` with random factors (about a fraction ``zeros`` of
    their entries exactly zero) and, for ``delta > 0``, the band ``|i - j| < delta``
    kept, a fifth of its entries stored as exact zeros (which override the product)."""
    rng = np.random.default_rng(seed)
    left, right = rng.random((n, rank)), rng.random((m, rank))
    left[rng.random(left.shape) < zeros] = 0.0
    right[rng.random(right.shape) < zeros] = 0.0
    left[:, 0] += 0.05  # no zero row
    right[:, 0] += 0.05
    row, column = np.nonzero(np.abs(np.subtract.outer(np.arange(n), np.arange(m))) < delta)
    values = rng.random(row.size) * (rng.random(row.size) > 0.2)
    band = sp.csr_array(sp.coo_array((values, (row, column)), shape=(n, m)))
    sums = LowRank(left, right, band).toarray().sum(axis=1)
    band = sp.csr_array(
        (band.data / sums[entry_rows(band.indptr)], band.indices, band.indptr), shape=(n, m)
    )
    return LowRank(left / sums[:, None], right, band)


# --- brute-force references ----------------------------------------------------------------


def algorithm_1(v, p):
    """A literal transcription of Algorithm 1 (sorted order: descending, lower index first)."""
    order = sorted(range(len(v)), key=lambda j: (-v[j], j))
    kept, total = [], 0.0
    for j in order:
        if v[j] == 0 and p == 1:
            break
        total += v[j]
        kept.append(j)
        if p < 1 and total >= p - TOLERANCE:
            break
    out = np.zeros(len(v))
    out[kept] = np.asarray(v)[kept] / total
    return out


def brute_force_filter(prior, T, E, observations):
    """Filtered beliefs and log evidence by summing over every state path (dense arrays;
    ``inference/brute_force.py``, the one oracle)."""
    logs = brute_force.symbol_log_likelihoods(E, np.asarray(observations))
    return brute_force.filtering(prior, T, logs), brute_force.smoothing(prior, T, logs)[1]


def brute_force_log_evidence(prior, T, E, sequences) -> float:
    """``sum log P(sequence)`` over the rows of ``sequences`` by summing over every state
    path (dense arrays: prior (n,), T (n, n), E (n, V); ``inference/brute_force.py``)."""
    return sum(
        brute_force.smoothing(prior, T, brute_force.symbol_log_likelihoods(E, sequence))[1]
        for sequence in np.asarray(sequences)
    )


def array_leaves(tree, path=()):
    """``(path, array)`` of every array in a tree of (named) tuples, depth first."""
    if isinstance(tree, tuple):
        for k, child in enumerate(tree):
            yield from array_leaves(child, (*path, k))
    else:
        yield path, tree


def replaced(tree, path, value):
    """``tree`` with the array at ``path`` (as ``array_leaves`` gives it) replaced."""
    if not path:
        return value
    children = list(tree)
    children[path[0]] = replaced(tree[path[0]], path[1:], value)
    return type(tree)(*children)


def finite_difference_errors(log_evidence, p, gradient, samples: int, h: float = 1e-6):
    """``(path, index, analytic, numeric)`` at about ``samples`` entries of every array of
    the parameters ``p``: ``gradient``'s entry against the central difference of
    ``log_evidence(parameters)``."""
    for path, values in array_leaves(p):
        expected = gradient
        for k in path:
            expected = expected[k]
        for index in list(np.ndindex(values.shape))[:: max(1, values.size // samples)]:
            up, down = values.copy(), values.copy()
            up[index] += h
            down[index] -= h
            numeric = log_evidence(replaced(p, path, up)) - log_evidence(replaced(p, path, down))
            yield path, index, expected[index], numeric / (2 * h)


# --- stores and corpora ---------------------------------------------------------------------


def assert_same_values(actual, expected, rtol: float = 0.0) -> None:
    """Every variable of the Dataset ``expected`` equals ``actual``'s (within ``rtol`` for
    floats), the measurements of a run (``MEASURED``: clocks, memory) aside."""
    for name in sorted(set(expected.data_vars) - MEASURED):
        got, wanted = actual[name].values, expected[name].values
        if rtol and got.dtype.kind == "f":
            np.testing.assert_allclose(got, wanted, rtol=rtol, atol=0, err_msg=name)
        else:
            np.testing.assert_array_equal(got, wanted, err_msg=name)


def corpus_folder(folder, text, train=8):
    """A folder of ``train`` training documents of ``text`` and one validation and one test
    document of it (numbers, which are not words, make their texts differ)."""
    folder.mkdir()
    wanted = ["train"] * train + ["validation", "test"]
    numbers = iter(range(10_000))
    for k, name in enumerate(wanted):
        document = next(
            d for d in (f"{text} {next(numbers)}" for _ in range(10_000)) if part(d) == name
        )
        (folder / f"{k}.txt").write_text(document)
    return folder


# --- the README ---------------------------------------------------------------------------

REPOSITORY = Path(__file__).resolve().parents[1]


def readme_blocks(language: str, page: str = "README.md") -> list[str]:
    """The fenced blocks of ``language`` (``bash``, ``python``) of the README, or of another
    ``page`` of the repository (``docs/clusters.md``), in order."""
    text = (REPOSITORY / page).read_text()
    return [block.split("```", 1)[0] for block in text.split(f"```{language}\n")[1:]]


def readme_commands() -> list[list[str]]:
    """Every command of the README's bash blocks after the two quick-start commands, split
    into words, with ``.venv/bin/python`` as this interpreter (the same venv's Python)."""
    lines = [line for block in readme_blocks("bash")[1:] for line in block.splitlines()]
    return [
        [sys.executable if word == ".venv/bin/python" else word for word in line.split()]
        for line in lines
        if line.strip()
    ]
