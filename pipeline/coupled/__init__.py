"""Weakly coupled (relational) HMMs: k chains, each moving given the joint state.

The models and the chain-by-chain inference of Thon and Kersting, "Distributed Relational
State Representations for Complex Stochastic Processes":

- ``model``: the ``CoupledHMM`` container (per-chain priors, own and pairwise transition
  tables mixed by ``weights``, per-chain emissions; every chain's symbol or the set of
  symbols observed) and its joint chain as an ``HMM`` where that fits in memory;
- ``family``: the seeded mixed-memory family the sweeps use (coupling ``eps``);
- ``relational`` (and ``relational_parse``): relational specs in YAML (abstract states,
  guards, abstract transitions, selection distribution, observation rules; the string
  quartet in ``conf/relational``) grounded into a ``CoupledHMM``;
- ``exact``: filtering, smoothing and Viterbi on the joint chain: ``pipeline.inference``'s
  recursions over its structured operator, a step operator;
- ``meanfield``: the structured mean field, online (filtering) and over a sequence
  (smoothing), each chain smoothed by ``pipeline.inference``'s recursion;
- ``viterbi``: the chain-wise Viterbi of Thon and Kersting's equations (a) to (d);

>>> import numpy as np
>>> from pipeline.coupled.family import build
>>> from pipeline.coupled import exact, meanfield
>>> model = build(chains=3, n_states=4, eps=0.0, seed=0)
>>> _, observations = model.sample(10, np.random.default_rng(0))
>>> reference = exact.marginals(exact.smoothing(model, observations).smoothed, model.sizes)
>>> approximate = meanfield.smoothing(model, observations).marginals
>>> bool(np.allclose(reference[0], approximate[0], atol=1e-6))  # independent chains: exact
True
"""
