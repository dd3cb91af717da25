"""The modes that read the whole observed sequence: ``smooth`` and ``decode``.

``smooth`` measures the posteriors ``P(S_t | o_0..o_{T-1})`` of the approximate model
against the exact model's (``pipeline.inference.smoothing_chunks``), ``decode`` its Viterbi
path against the exact model's (``pipeline.inference.viterbi``), both on ``filter``'s
observations. What ``tasks`` does for the forward modes, done here for these: the exact
reference of a model, mode and seed (smoothed posteriors kept whole where they fit a
history's memory, else written to the worker's disk, ``spilled``; a Viterbi path), a cell's
measures against it, and one timed run.

Smoothing runs a segment of steps at a time from checkpoints where the whole horizon's
posteriors do not fit (``segment_steps``), latest segment first; the exact side is read
back for the same steps from memory or disk, or computed beside the approximation, segment
by segment, where the reference could not be kept (the same numbers). Belief pruning has
no smoothing or Viterbi counterpart, and a low-rank matrix too large for the max-product
step no Viterbi run: such a cell measures nothing (NaN, the schema's ``missing`` says why).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import numpy as np

from pipeline.inference import ViterbiResult, path_log_probability, smoothing_chunks, viterbi
from pipeline.inference.smoother import checkpoint_steps
from pipeline.kinds.methods import spilled
from pipeline.methods import Approximation
from pipeline.metrics import total_variation
from pipeline.models import HMM
from pipeline.operators import check_max_product

MODES = ("smooth", "decode")

Threads = Callable[[], AbstractContextManager]
"""A context in which the approximate run takes the timed runs' threads."""


def segment_steps(steps: int, history: int) -> int:
    """Steps of a smoothing segment: the whole horizon where ``history`` (the steps a cell
    keeps at a time, ``records.history_steps``) holds it, else ``ceil(sqrt(steps))``, the
    least memory (about ``2 sqrt(steps)`` beliefs)."""
    return steps if history >= steps else checkpoint_steps(steps, None)


def decodable(hmm: HMM) -> bool:
    """Whether Viterbi runs on ``hmm`` (a ``LowRank`` matrix above ``lowrank.MAX_DENSE``
    entries has no max-product step)."""
    try:
        check_max_product(hmm.transition)
    except ValueError:
        return False
    return True


def runs(approximation: Approximation, mode: str) -> bool:
    """Whether ``approximation`` has a run in ``mode``: no belief pruning (smoothing and
    Viterbi prune nothing), and for ``decode`` a max-product step."""
    return approximation.prune >= 1 and (mode != "decode" or decodable(approximation.hmm))


def smooth_reference(hmm: HMM, observed: np.ndarray, history: int):
    """The exact posteriors of every step, (steps, n_states): an ndarray where they fit
    ``history`` steps, else written to the worker's disk segment by segment (a
    ``SpilledHistory``; None where it could not be written), and the log evidence."""
    steps = observed.size
    segment = segment_steps(steps, history)
    parts = smoothing_chunks(hmm, observed, checkpoint=segment)
    if segment >= steps:
        whole = next(parts)
        return whole.posteriors, whole.log_evidence
    spill = spilled.Spill((steps, hmm.n_states))
    for part in parts:
        if not spill.write(part.posteriors, start=part.start):
            break
    kept = spill.close()
    return kept, part.log_evidence if kept else np.nan


def decode_reference(hmm: HMM, observed: np.ndarray) -> np.ndarray | None:
    """The exact model's Viterbi path (steps,), or None where it has no max-product step."""
    return viterbi(hmm, observed).path if decodable(hmm) else None


def _spans(steps: int, segment: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of every segment, latest first: the order smoothing hands them out."""
    return [(start, min(start + segment, steps)) for start in range(0, steps, segment)][::-1]


@contextlib.contextmanager
def _exact_posteriors(hmm: HMM, exact, segment: int) -> Iterator[Iterator[tuple]]:
    """For each segment, latest first, the exact posteriors (c, n_states) and the log
    evidence: read from the reference (memory or this machine's disk), else computed here;
    None and NaN without an exact run."""
    steps = exact.observations.size
    with spilled.rows_of(exact.beliefs, _spans(steps, segment)) as rows:
        if rows is not None:
            yield ((posteriors, exact.log_evidence) for posteriors in rows)
        elif exact.run:
            parts = smoothing_chunks(hmm, exact.observations, checkpoint=segment)
            yield ((part.posteriors, part.log_evidence) for part in parts)
        else:
            yield itertools.repeat((None, np.nan))


def _nothing(**given) -> dict[str, object]:
    """Every measure of the sequence modes NaN, but those ``given``."""
    names = (
        "tv",
        "tv_max",
        "log_evidence",
        "log_evidence_error",
        "zero_evidence",
        "path_disagreement",
        "log_probability_gap",
        "paths_equal",
    )
    return {name: np.nan for name in names} | given


def smooth_measures(
    hmm: HMM, approximation: Approximation, exact, *, history: int, threads: Threads
) -> dict[str, object]:
    """TV between the exact and the approximate posteriors at every step (the exact
    reference ``exact``, a ``records.Reference``), its largest value, the log evidence and its
    error, and the approximate run's zero-evidence steps, a segment at a time."""
    observed = exact.observations
    steps = observed.size
    tv = np.full(steps, np.nan)
    if not runs(approximation, "smooth"):
        return _nothing(tv=tv, log_evidence=exact.log_evidence)
    segment = segment_steps(steps, history)
    approx = smoothing_chunks(approximation.hmm, observed, checkpoint=segment)
    log_evidence = exact.log_evidence
    with _exact_posteriors(hmm, exact, segment) as exacts:
        while True:
            with threads():
                part = next(approx, None)
            if part is None:
                break
            reference, log_evidence = next(exacts)
            stop = part.start + part.posteriors.shape[0]
            if reference is not None:  # else no exact run: no error to measure
                tv[part.start : stop] = total_variation(reference, part.posteriors)
            last = part
    return _nothing(
        tv=tv,
        tv_max=float(tv.max()),
        log_evidence=log_evidence,
        log_evidence_error=last.log_evidence - log_evidence,
        zero_evidence=last.zero_evidence.size,
    )


def decode_measures(
    hmm: HMM, approximation: Approximation, exact, *, threads: Threads
) -> dict[str, object]:
    """The approximate model's Viterbi path against the exact model's (``exact.path``):
    the fraction of steps where they differ, the gap of their log probabilities jointly
    with the observations under the exact model, whether they are equal, and the steps no
    approximate path could emit."""
    steps = exact.observations.size
    if not runs(approximation, "decode"):
        return _nothing(tv=np.full(steps, np.nan))
    with threads():
        approx = viterbi(approximation.hmm, exact.observations)
    assert isinstance(approx, ViterbiResult), "one sequence's"
    zero = approx.zero_evidence.size
    if exact.path is None:
        return _nothing(tv=np.full(steps, np.nan), zero_evidence=zero)
    observed = exact.observations
    differ = approx.path != exact.path
    gap = path_log_probability(hmm, exact.path, observed) - path_log_probability(
        hmm, approx.path, observed
    )
    return _nothing(
        tv=np.full(steps, np.nan),
        zero_evidence=zero,
        path_disagreement=float(differ.mean()),
        log_probability_gap=float(gap),
        paths_equal=float(not differ.any()),
    )


def _at_end(seconds: float, steps: int) -> np.ndarray:
    """A run's clock as the store keeps it (cumulative per step): only its whole time, at
    the last step."""
    elapsed = np.full(steps, np.nan)
    elapsed[-1] = seconds
    return elapsed


def elapsed(mode: str, hmm: HMM, observed: np.ndarray, history: int) -> np.ndarray:
    """One timed run of ``mode`` on ``hmm``: NaN at every step but the last, which holds the
    seconds of the whole run (smoothing segment by segment as the accuracy pass does)."""
    start = time.perf_counter()
    if mode == "smooth":
        segment = segment_steps(observed.size, history)
        for _ in smoothing_chunks(hmm, observed, checkpoint=segment):
            pass
    else:
        viterbi(hmm, observed)
    return _at_end(time.perf_counter() - start, observed.size)
