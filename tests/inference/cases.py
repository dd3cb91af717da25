"""The tiny models, sequences and references the inference tests share."""

import brute_force
import numpy as np
import scipy.sparse as sp
from hmmlearn.hmm import CategoricalHMM
from hypothesis import strategies as st

from pipeline.methods import approximate
from pipeline.models import HMM, build_model
from pipeline.operators import toarray
from pipeline.testing.random_models import random_hmm

from helpers import random_low_rank, random_structured

FORMATS = {
    "dense": lambda seed, n: random_hmm(seed, n, 1).transition,
    "csr": lambda seed, n: sp.csr_array(random_hmm(seed, n, 1, zeros=0.4).transition),
    "structured": lambda seed, n: random_structured(seed, n, n),
    "lowrank": lambda seed, n: random_low_rank(seed, n, n, rank=2),
    "banded": lambda seed, n: random_low_rank(seed, n, n, rank=2, delta=1 if n > 1 else 0),
}
"""A random n x n transition matrix in each format (tiny, for brute force; the band is the
diagonal, whose stored zeros can never empty a row)."""


def tiny_cases(max_steps: int = 5) -> dict:
    """Hypothesis strategies of a tiny model and sequence: its seed, n states, m symbols and
    1 to ``max_steps`` observations (-1 none; read with ``symbols``)."""
    return {
        "seed": st.integers(0, 2**32 - 1),
        "n": st.integers(1, 3),
        "m": st.integers(1, 3),
        "observed": st.lists(st.integers(-1, 2), min_size=1, max_size=max_steps),
    }


def symbols(observed: list[int], m: int) -> np.ndarray:
    """``observed`` as symbols of an m-symbol emission: those past it become -1 (none)."""
    return np.array([o if o < m else -1 for o in observed])


def tiny_hmm(form: str, seed: int, n: int, m: int) -> HMM:
    base = random_hmm(seed, n, m)
    return HMM(base.prior, FORMATS[form](seed, n), base.emission)


def evidence_kinds(hmm: HMM, observations):
    """The same observations as symbols, as likelihoods and as log-likelihoods."""
    logs = brute_force.symbol_log_likelihoods(toarray(hmm.emission), observations)
    return {
        "observations": observations,
        "likelihoods": np.exp(logs),
        "log_likelihoods": logs,
    }, logs


def hmmlearn_reference(hmm: HMM) -> CategoricalHMM:
    reference = CategoricalHMM(
        n_components=hmm.n_states, n_features=hmm.n_observations, implementation="log"
    )
    reference.startprob_ = hmm.prior
    reference.transmat_ = toarray(hmm.transition)
    reference.emissionprob_ = toarray(hmm.emission)
    return reference


def reference_models():
    """Dense, top-p CSR, structured, kernel and banded-kernel HMMs of tens of states."""
    bell = build_model("bell", 40, seed=1)
    yield "dense", build_model("dirichlet", 30, seed=2)
    yield "topp-csr", approximate(bell, "topp", 0.9).hmm
    yield "structured", build_model("bell", 40, seed=1, structured=True)
    yield "kernel", build_model("kernel", 30, seed=1, n_features=4, n_observations=7)
    yield "banded", build_model("banded_kernel", 30, seed=1, n_features=4, n_observations=7)


def gaussian_model(seed: int, n: int, steps: int):
    """A random dense HMM whose states emit N(mean_i, sigma_i^2), and per-step Gaussian
    log-likelihoods of a sequence drawn from it."""
    rng = np.random.default_rng(seed)
    means, sigmas = rng.normal(0, 3, n), rng.uniform(0.3, 1.5, n)
    hmm = HMM(rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n), size=n), np.ones((n, 1)))
    y = rng.normal(0, 3, steps)
    logs = -0.5 * ((y[:, None] - means) / sigmas) ** 2 - np.log(sigmas * np.sqrt(2 * np.pi))
    return hmm, logs
