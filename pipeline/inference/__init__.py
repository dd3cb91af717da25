"""Inference in an HMM: prediction, filtering, smoothing, Viterbi decoding and sampling.

Pure functions over an ``HMM`` (``pipeline.hmm.HMM``), one signature and one result
type for every matrix format: the format of ``hmm.transition`` supplies the compiled step
(``pipeline.operators.layout``): one BLAS product per step for a dense matrix, the stored
entries of the rows of non-zero states for CSR, the CSR step plus a rank-one or low-rank
update for ``SparsePlusRankOne`` and ``LowRank``. Each recursion runs its whole horizon
in one compiled loop (``pipeline.kernels``): the forward step (``forward``), the backward
step (``backward``: a product with ``T`` where the forward one is with ``T.T``) and the
max-product step (``maxproduct``). Transitions that change with time (``transitions=``: an
array (T - 1, n_states, n_states) as dynamax takes, a sequence of matrices, or a callable
of t) run the same recursions step by step in Python over the step-operator protocol of
``pipeline.operators`` (``recursion``), as does any ``StepOperator`` that is not a matrix
(the coupled joint chain's), with the same conventions.

- ``predict``: ``P(S_t)`` without observations;
- ``filtering``, ``filtering_chunks``: ``P(S_t | o_0..o_t)`` and the evidence
  (``FilterResult``, ``FilterBatchResult``, ``Chunk``), optionally with belief pruning;
- ``smoothing``, ``smoothing_chunks``: ``P(S_t | o_0..o_{T-1})``, the evidence and the
  expected transition counts (``SmoothResult``, ``SmoothBatchResult``, ``SmoothChunk``);
- ``viterbi``: the most probable path (``ViterbiResult``, ``ViterbiBatchResult``), and
  ``path_log_probability``: the joint log probability of any path and the observations;
- ``sample``: state paths and symbols (``Sample``, ``SampleBatch``).

Conventions: ``observations[t]`` is the symbol observed at step ``t`` or -1 for none. Step 0
is the prior conditioned on ``observations[0]``; every later step is a transition followed
by conditioning. A batch of sequences (a 2-D ``observations``, or a batch of initial
distributions) gets its own result type, whose arrays have a leading batch axis B. When an
observation has zero probability under the current belief (it happens in top-p models,
which drop states and symbols), the step keeps the predicted belief, the step is listed in
``zero_evidence`` and ``log_evidence`` is ``-inf``: never a crash or a NaN.

Any emission model: every function that conditions on observations takes, instead of
symbols of ``hmm.emission``, each step's likelihoods ``P(o_t | S_t = i)`` (``likelihoods``)
or their logs (``log_likelihoods``), shape (T, n_states) or (B, T, n_states), and then does
not read ``hmm.emission``; each row is rescaled before use (``inputs.SCALE_RANGE``), so
likelihoods far below floating point's normal range keep the evidence exact. Gaussian
emissions, with a one-symbol emission matrix standing in for the unused one:

>>> import numpy as np
>>> from pipeline.hmm import HMM
>>> means, sigma = np.array([-1.0, 0.0, 2.0]), 0.5
>>> T = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
>>> hmm = HMM(np.full(3, 1 / 3), T, np.ones((3, 1)))
>>> y = np.array([-1.2, -0.8, 0.1, 2.2, 1.9])
>>> z = (y[:, None] - means) / sigma
>>> log_likelihoods = -0.5 * z**2 - np.log(sigma * np.sqrt(2 * np.pi))
>>> smoothed = smoothing(hmm, log_likelihoods=log_likelihoods)
>>> smoothed.posteriors.argmax(axis=1)
array([0, 0, 1, 2, 2])
>>> viterbi(hmm, log_likelihoods=log_likelihoods).path
array([0, 0, 1, 2, 2])
>>> filtered = filtering(hmm, log_likelihoods=log_likelihoods)
>>> bool(np.isclose(filtered.log_evidence, smoothed.log_evidence, rtol=1e-12))
True
"""

from pipeline.inference.decoder import (
    ViterbiBatchResult,
    ViterbiResult,
    path_log_probability,
    viterbi,
)
from pipeline.inference.forward import (
    Chunk,
    FilterBatchResult,
    FilterResult,
    filtering,
    filtering_chunks,
    predict,
)
from pipeline.inference.sampler import Sample, SampleBatch, sample
from pipeline.inference.smoother import (
    SmoothBatchResult,
    SmoothChunk,
    SmoothResult,
    smoothing,
    smoothing_chunks,
)

__all__ = [
    "Chunk",
    "FilterBatchResult",
    "FilterResult",
    "Sample",
    "SampleBatch",
    "SmoothBatchResult",
    "SmoothChunk",
    "SmoothResult",
    "ViterbiBatchResult",
    "ViterbiResult",
    "filtering",
    "filtering_chunks",
    "path_log_probability",
    "predict",
    "sample",
    "smoothing",
    "smoothing_chunks",
    "viterbi",
]
