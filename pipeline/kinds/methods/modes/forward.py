"""The forward recursion's modes (``predict``, ``filter``): what they share.

A run is ``pipeline.inference.filtering_chunks``: clocked step by step, with belief pruning
where the approximation prunes. The exact reference keeps its beliefs of every step where
they fit a history's memory (``base.history_steps``), else writes them to the worker's disk
(``base.Disk``); a cell holds its approximate run against the exact one a chunk of steps at
a time, each step reduced as it goes: TV, the errors each step adds (the online certificate
of the prediction error), the work of a step and the evidence.

Its namesakes: ``pipeline.inference.forward`` (the filtering these modes run) and
``pipeline.kernels.forward`` (its compiled recursion); all three are the forward recursion,
at three layers.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference import FilterResult, filtering, filtering_chunks
from pipeline.kinds.methods.modes.base import (
    HISTORY_BYTES,
    Disk,
    Exact,
    Mode,
    Reference,
    Threads,
    history_steps,
    nothing,
    reading,
    span_list,
)
from pipeline.methods import Approximation
from pipeline.metrics import step_errors, total_variation, tv_certificate
from pipeline.operators import step_work


class Accuracy(NamedTuple):
    """What the approximate run measures against the exact one, step by step."""

    tv: np.ndarray  # (T,): TV(P_t, Q_t), NaN without an exact run
    errors: np.ndarray  # (T,): the most TV each step adds (``metrics.step_errors``)
    work: list  # (T - 1,): multiply-adds of each step (``operators.step_work``)
    log_evidence: float  # exact, NaN without an exact run
    log_evidence_approx: float
    zero_evidence: int  # steps whose observation the approximate belief made impossible


def accuracy(
    hmm: HMM, approximation: Approximation, exact: Reference, *, threads: Threads, disk: Disk
) -> Accuracy:
    """The approximate run against the exact one, a chunk of steps at a time
    (``history_steps``), each step reduced as it goes: the memory of a chunk, never of the
    whole horizon where it does not fit. The approximate run has the timed runs' threads;
    an exact run computed here (its history could not be read) the reference's, so every
    value is the one a whole run gives."""
    observed, approximate = exact.observations, approximation.hmm
    T = approximate.transition
    chunk = history_steps(observed.size, approximate.n_states)
    approx = filtering_chunks(approximate, observed, chunk=chunk, prune=approximation.prune)
    tv, errors = [], []
    work: list[int] = []
    log_evidence, zero_evidence, previous, last = exact.log_evidence, 0, None, None

    def computed():
        parts = filtering_chunks(hmm, observed, chunk=chunk)
        return ((part.beliefs, part.log_evidence) for part in parts)

    with reading(disk, exact, span_list(observed.size, chunk), computed) as exacts:
        while True:
            with threads():
                part = next(approx, None)
            if part is None:
                break
            reference, log_evidence = next(exacts)
            tv.append(
                np.full(len(part.beliefs), np.nan)  # no exact run: no error to measure
                if reference is None
                else total_variation(reference, part.beliefs)
            )
            errors.append(
                step_errors(
                    approximation.prior_error,
                    approximation.row_error,
                    part.beliefs,
                    part.pruned,
                    previous=previous,
                )
            )
            before = part.beliefs[:-1] if previous is None else [previous, *part.beliefs[:-1]]
            work.extend(step_work(T, row != 0) for row in before)
            zero_evidence += int(part.zero.sum())
            previous, last = part.beliefs[-1].copy(), part
    assert last is not None, "at least one step"
    return Accuracy(
        np.concatenate(tv),
        np.concatenate(errors),
        work,
        log_evidence,
        last.log_evidence,
        zero_evidence,
    )


class Forward(Mode):
    """A mode of the forward recursion: ``P(S_t)`` or ``P(S_t | o_0..o_t)``, step by step.
    Every approximation has a run (belief pruning too); the certificate bounds the error of
    prediction alone (with observations, conditioning can enlarge an error), the evidence is
    filtering's alone."""

    stepped = True

    def supports(self, approximation: Approximation) -> bool:
        return True

    def reference(self, hmm: HMM, observed: np.ndarray, *, disk: Disk) -> Exact:
        """The exact beliefs of every step, kept whole where they fit ``history_steps``, else
        written to the worker's disk chunk by chunk, and the log evidence."""
        chunk = history_steps(observed.size, hmm.n_states)
        if chunk >= observed.size:
            result = filtering(hmm, observed)
            assert isinstance(result, FilterResult), "one sequence's"
            return Exact(result.beliefs, result.log_evidence)
        spill = disk.Spill((observed.size, hmm.n_states))
        for part in filtering_chunks(hmm, observed, chunk=chunk):
            if not spill.write(part.beliefs):
                break
        history = spill.close()
        return Exact(history, part.log_evidence if history else np.nan)

    def measures(self, hmm, approximation, exact, *, gamma, threads, disk):
        """TV at every step, the certificate (prediction only), the work of a step and the
        evidence (filtering only)."""
        found = accuracy(hmm, approximation, exact, threads=threads, disk=disk)
        certificate = tv_certificate(gamma, found.errors)
        observed = self.observed
        return nothing(
            exact.observations.size,
            tv=found.tv,
            certificate=np.full(certificate.shape, np.nan) if observed else certificate,
            work=float(np.mean(found.work)) if found.work else np.nan,
            log_evidence=found.log_evidence if observed else np.nan,
            log_evidence_error=(
                found.log_evidence_approx - found.log_evidence if observed else np.nan
            ),
            zero_evidence=found.zero_evidence,
        )

    def run(self, hmm: HMM, observed: np.ndarray, prune: float) -> np.ndarray:
        """The cumulative seconds of every step of one run that keeps only what it must: the
        whole history where it fits ``HISTORY_BYTES``, else chunks (between which the clock
        stops)."""
        chunk = history_steps(observed.size, hmm.n_states)
        if chunk >= observed.size:
            return filtering(hmm, observed, prune=prune).elapsed
        parts, offset = [], 0.0
        for part in filtering_chunks(hmm, observed, chunk=chunk, prune=prune):
            parts.append(part.elapsed + offset)
            offset = parts[-1][-1]
        return np.concatenate(parts)

    def run_bytes(self, steps: int, n_states: int) -> int:
        """The filtered beliefs a run keeps (``history_steps``)."""
        return min(history_steps(steps, n_states) * 8 * n_states, HISTORY_BYTES)
