"""Banded + low-rank: the band ``|i - j| < DELTA`` kept exactly, the rest a rank-r fit.

Kernel HMMs add a band to the kernel (Chiu, Deng, Rush, "Scaling Hidden Markov
Language Models", Section 7) so that local structure the low rank cannot express
stays exact. As an approximation method: the entries of
the band ``|i - j| < DELTA`` keep their exact values, and the others are fitted
by weighted KL-NMF (``pipeline.methods.lowrank.fit`` with the band masked
out) and rescaled per row to the row's exact off-band mass, so every row is a
distribution. The setting is the rank r; the band width is the method's
constant ``DELTA`` (the ``banded_kernel`` family's default), documented
rather than swept, so the method is one line of ``grid.methods``.

A step costs O(n (r + DELTA)). Prior and emissions stay exact. Guarantee:
none a priori; each row's ``eps_i`` is measured, as for ``lowrank``.
"""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM
from pipeline.methods import lowrank
from pipeline.methods.base import Approximation
from pipeline.operators import LowRank, entry_rows
from pipeline.operators.lowrank import band_pattern

SETTING = lowrank.SETTING

DELTA = 3
"""The band kept exactly: ``|i - j| < DELTA``, up to 5 entries per row."""

check = lowrank.check


def approximate(hmm: HMM, setting) -> Approximation:
    """The band of the transitions kept, the rest fitted at rank ``setting``."""
    T = lowrank.dense_transitions(hmm)
    n = hmm.n_states
    band = band_pattern(n, min(DELTA, n))
    rows = entry_rows(band.indptr)
    band.data = T[rows, band.indices]
    mask = np.ones_like(T)
    mask[rows, band.indices] = 0.0
    W, H = lowrank.fit(T * mask, int(setting), mask)
    product_band = np.bincount(
        rows, weights=np.einsum("kf,fk->k", W[rows], H[:, band.indices]), minlength=n
    )
    off_band = W @ H.sum(axis=1) - product_band
    target = 1.0 - np.bincount(rows, weights=band.data, minlength=n)
    target = np.maximum(target, 0.0)
    scale = np.divide(target, off_band, out=np.zeros(n), where=off_band > 0)
    Q = LowRank(W * scale[:, None], H.T, band)
    return Approximation(
        HMM(hmm.prior, Q, hmm.emission), 1.0, 0.0, lowrank.row_errors(T, Q.toarray())
    )
