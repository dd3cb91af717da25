"""Learning an HMM by EM (Baum-Welch) whose E-step is exact or approximate.

``fit(hmm, observations, ...)`` runs EM from ``hmm`` on one or many sequences (ragged lengths,
-1 for a step that observed nothing, as in ``pipeline.inference``) and returns the fitted
model and its ``History``: per iteration the training log-likelihood, the held-out one, and
the seconds of the E-step and of the M-step, and whether it converged. Each iteration
(``em``):

- E-step: ``pipeline.inference.smoothing(..., counts=True)`` on the current model, or on its
  approximation by a method of ``pipeline.methods.METHODS`` (``topp``, ``topk``, ``lowrank``,
  ``banded_lowrank`` or a plug-in) built from the current parameters by the method's own
  ``approximate``. The posteriors ``P(S_t | o)`` give the prior's and the emissions'
  statistics, the expected transition counts ``sum_t P(S_t = i, S_{t+1} = j | o)`` the
  transitions'. The training log-likelihood is the E-step's: the approximation's, if any.
- M-step: the full model re-estimated, never the approximation (``entries.reestimate``).

**What an approximate E-step does to the support.** An approximation keeps some entries of
the prior, of the transitions and (top-p and top-k: Definition 4 of the top-p paper) of the
emissions; its counts are zero off them because it never looked there, not because the data
say so. Plain EM would set those entries to zero, and an entry once zero stays zero under EM
(every later E-step counts nothing there): top-p would cut each row's tail again at every
iteration, until every entry left in a row is above ``1 - p``. So the M-step learns only the
entries the approximation kept and holds the others at their values: row ``i``'s kept
entries share the mass its other entries leave, in proportion to their counts, the maximiser
of the expected complete-data log-likelihood over the kept entries. Nothing is smoothed or
added: a zero of the model stays zero, except where an approximation puts mass the model has
none (a low-rank fit's product), which a dense model learns from its counts and a CSR model,
whose pattern is fixed, cannot. Every row sums to 1; a row without counts (its state never
in the E-step's posteriors) keeps its previous values. An approximation that keeps
everything (``p = 1``, ``k = n``) gives exact EM.

**Sequences an approximation rules out.** Top-p and top-k truncate the emissions too, so an
observed symbol can have probability zero in every state the E-step holds: smoothing scores
the sequence ``-inf``. ``fit`` refuses such a training sequence in one line, naming it and
the iteration, rather than skip it (the data would change from one iteration to the next,
and their log-likelihoods no longer compare). ``topp_transitions`` and ``topk_transitions``
truncate the transitions alone (prior and emissions exact), and the message names them;
``emission=Categorical(hmm.emission)`` keeps the emissions exact with any method: an
``Emission`` model is never approximated, so the method approximates only the prior and the
transitions. Held-out scores are exact, and ``-inf`` is recorded
there. Belief pruning (``topp_states`` with ``p < 1``) is refused: smoothing does not prune.

**Formats.** Dense and CSR transitions (and emission matrices) learn entry by entry, CSR on
its stored pattern. ``SparsePlusRankOne`` and ``LowRank`` transitions are refused in one
line (pass a dense or CSR model). The counts of a low-rank E-step (``lowrank``,
``banded_lowrank``) are of rank ``F T``; a dense model reads them at all ``n^2`` entries.

**Emissions.** Categorical by counts (``hmm.emission``, or ``Categorical``), ``Gaussian``
(one real number a step) by weighted moments with a variance floor (``VARIANCE_FLOOR``), and
any other model through the M-step hook: a subclass of ``Emission`` with
``log_likelihoods(observations) -> (T, n_states)`` and ``m_step(observations, posteriors)``.
``pseudocount`` smooths the counts of ``hmm.emission``'s symbols (add-lambda, the estimate
under a Dirichlet prior), so that a symbol the training sequences never show keeps a
probability in every state, and a held-out sequence that shows it a finite score.

**For the learning sweep.** ``problem.draw``: a generating model's training and held-out
sequences and the start model, from one seed; ``compare.reference`` and ``compare.compare``:
exact EM once per problem, then one approximate E-step's run against it, as a
``Comparison`` record; ``summary``: the report's numbers over the sweep's Dataset (it
imports xarray, which ``import pipeline.learning`` does not).

>>> import numpy as np
>>> from pipeline.inference import sample
>>> from pipeline.models import build_model
>>> truth = build_model("dirichlet", 5, seed=0, alpha=1.0)
>>> data = sample(truth, 49, seed=1, n_sequences=30).observations  # 30 sequences of 50
>>> held = sample(truth, 49, seed=2, n_sequences=30).observations
>>> start = build_model("dirichlet", 5, seed=3, alpha=1.0)
>>> exact = fit(start, data, iterations=20, held_out=held)
>>> exact.history.log_likelihood.shape, exact.history.converged
((20,), False)
>>> bool((np.diff(exact.history.log_likelihood) > 0).all())  # EM never lowers it
True
>>> everything = fit(start, data, approximation="topk", setting=5, iterations=20)
>>> bool(np.allclose(everything.hmm.transition, exact.hmm.transition, rtol=0, atol=1e-12))
True
>>> top = fit(
...     start, data, approximation="topp", setting=0.9, emission=Categorical(start.emission),
...     iterations=20, held_out=held
... )
>>> top.emission.probabilities.shape, bool(np.isfinite(top.history.held_out).all())
((5, 5), True)
"""

from pipeline.learning.emissions import VARIANCE_FLOOR, Categorical, Emission, Gaussian
from pipeline.learning.fit import Fit, History, fit

__all__ = ["VARIANCE_FLOOR", "Categorical", "Emission", "Fit", "Gaussian", "History", "fit"]
