"""Banded kernel HMMs: a band of free logits plus the kernel (Chiu, Deng, Rush, "Scaling
Hidden Markov Language Models", Section 7).

The entries ``|i - j| < delta`` of each transition row come from their own
logits, ``exp(theta_ij)`` with ``theta_ij`` standard normal, and replace the
kernel's there; the kernel (``pipeline.models.kernel``) gives the rest, and
band and kernel are normalised together (``Z_B + Z_K``, equation 20). The
band's logits are offset per row so that it holds ``band_mass`` of the row: a
local structure (states mostly move to their neighbours) on a low-rank
background, which a kernel of small rank alone cannot express.

The matrix is a ``LowRank`` with a band: a step costs O(n (F + delta)).
"""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM
from pipeline.models import kernel
from pipeline.models.family import ParameterError
from pipeline.operators import LowRank, entry_rows
from pipeline.operators.lowrank import band_pattern

GAMMA_EXACT_MAX_STATES = kernel.GAMMA_EXACT_MAX_STATES


def check(n_states: int, *, delta: int = 3, band_mass: float = 0.5, **kernel_params) -> None:
    """Raise ``ParameterError`` unless 1 <= delta <= n_states / 2, 0 < band_mass < 1 and the
    kernel's parameters (``pipeline.models.kernel.check``) are valid."""
    if isinstance(delta, bool) or int(delta) != delta or not 1 <= delta <= n_states / 2:
        raise ParameterError(
            "delta",
            f"the banded_kernel family needs an integer 1 <= delta <= n_states / 2, got {delta!r}",
        )
    if not 0 < band_mass < 1:
        raise ParameterError(
            "band_mass", f"the banded_kernel family needs 0 < band_mass < 1, got {band_mass}"
        )
    kernel.check(n_states, **kernel_params)


def build(
    n_states: int,
    seed: int = 0,
    *,
    delta: int = 3,
    band_mass: float = 0.5,
    n_features: int = 64,
    dim: int = 16,
    temperature: float = 0.5,
    n_observations: int = 64,
) -> HMM:
    """A random banded kernel HMM with ``n_states`` states.

    Parameters
    ----------
    delta : int
        The band ``|i - j| < delta`` (``2 delta - 1`` entries per inner row).
    band_mass : float in (0, 1)
        The share of every row's mass on its band.
    n_features, dim, temperature, n_observations
        As in the ``kernel`` family.
    """
    shape = {"n_features": n_features, "dim": dim, "temperature": temperature}
    check(n_states, delta=delta, band_mass=band_mass, n_observations=n_observations, **shape)
    rng = np.random.default_rng([seed, kernel.TRANSITION])
    phi_u, phi_v = kernel.features(rng, n_states, dim, n_features, temperature)
    band = band_pattern(n_states, delta)
    rows = entry_rows(band.indptr)
    off_band = phi_u @ phi_v.sum(axis=0) - np.bincount(
        rows, weights=np.einsum("kf,kf->k", phi_u[rows], phi_v[band.indices]), minlength=n_states
    )
    weights = np.exp(rng.standard_normal(band.nnz))
    band_sums = np.bincount(rows, weights=weights, minlength=n_states)
    # Band row i carries band_mass of Z_i = Z_B + Z_K, with Z_K the kernel's off-band mass.
    total = off_band / (1.0 - band_mass)
    band.data = weights / band_sums[rows] * band_mass
    left = phi_u / total[:, None]
    prior, emission = kernel.emission_and_prior(seed, n_states, n_observations)
    return HMM(prior, LowRank(left, phi_v, band), emission)
