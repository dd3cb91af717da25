"""The ``smooth`` mode: the posteriors ``P(S_t | o_0..o_{T-1})`` of every step given the
whole sequence (``pipeline.inference.smoothing_chunks``), on ``filter``'s observations.

Smoothing runs a segment of steps at a time from checkpoints where the whole horizon's
posteriors do not fit (``segment_steps``), latest segment first; the exact side is read
back for the same steps from memory or disk, or computed beside the approximation, segment
by segment, where the reference could not be kept (the same numbers). Belief pruning has
no smoothing counterpart: such a cell measures nothing (NaN, the schema's ``missing`` says
why). Its report section: the largest TV over steps, model by model.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference import smoothing_chunks
from pipeline.inference.smoother import checkpoint_steps
from pipeline.kinds.methods.modes import sections
from pipeline.kinds.methods.modes.base import (
    Disk,
    Exact,
    Mode,
    history_steps,
    nothing,
    posterior_measures,
    reading,
    span_list,
    timed_whole,
)
from pipeline.metrics import total_variation
from pipeline.results.schema import finite_median


def segment_steps(steps: int, n_states: int) -> int:
    """Steps of a smoothing segment: the whole horizon where a history of ``steps`` steps
    fits (``history_steps``), else ``ceil(sqrt(steps))``, the least memory (about
    ``2 sqrt(steps)`` beliefs)."""
    fits = history_steps(steps, n_states) >= steps
    return steps if fits else checkpoint_steps(steps, None)


SMOOTHING = (
    "Forward-backward with the approximate transitions against exact forward-backward, on "
    "the filtering runs' observations: the largest TV over every step between the posteriors "
    "P(S_t | o_0..o_{T-1}) (medians over seeds), in [smoothing.png](smoothing.png); the TV at "
    "every step is in the TV figure. At the last step the posterior is the filtered belief, "
    "so smoothing's largest TV is at least filtering's last. No bound is stored for smoothed "
    "posteriors: conditioning on later observations can enlarge an error as filtering's can."
)


class Smooth(Mode):
    name = registered = "smooth"
    title = "smoothing"
    produces = frozenset({"tv", "tv_max", "log_evidence", "log_evidence_error", "zero_evidence"})
    unsupported = "belief pruning (topp_states), which smoothing does not do"
    line, line_name = "-.", "dash-dot"

    def reference(self, hmm: HMM, observed: np.ndarray, *, disk: Disk) -> Exact:
        """The exact posteriors of every step, (steps, n_states): an ndarray where they fit a
        history, else written to the worker's disk segment by segment (None where it could
        not be written), and the log evidence."""
        steps = observed.size
        segment = segment_steps(steps, hmm.n_states)
        parts = smoothing_chunks(hmm, observed, checkpoint=segment)
        if segment >= steps:
            whole = next(parts)
            return Exact(whole.posteriors, whole.log_evidence)
        spill = disk.Spill((steps, hmm.n_states))
        for part in parts:
            if not spill.write(part.posteriors, start=part.start):
                break
        kept = spill.close()
        return Exact(kept, part.log_evidence if kept else np.nan)

    def measures(self, hmm, approximation, exact, *, gamma, threads, disk):
        """TV between the exact and the approximate posteriors at every step, its largest
        value, the log evidence and its error, and the approximate run's zero-evidence
        steps, a segment at a time."""
        observed = exact.observations
        steps = observed.size
        tv = np.full(steps, np.nan)
        if not self.supports(approximation):
            return nothing(steps, log_evidence=exact.log_evidence)
        segment = segment_steps(steps, hmm.n_states)
        approx = smoothing_chunks(approximation.hmm, observed, checkpoint=segment)
        log_evidence = exact.log_evidence

        def computed():
            parts = smoothing_chunks(hmm, observed, checkpoint=segment)
            return ((part.posteriors, part.log_evidence) for part in parts)

        spans = span_list(steps, segment)[::-1]  # latest first: the order smoothing hands out
        with reading(disk, exact, spans, computed) as exacts:
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
        return posterior_measures(tv, log_evidence, last.log_evidence, last.zero_evidence.size)

    def run(self, hmm: HMM, observed: np.ndarray, prune: float) -> np.ndarray:
        """One smoothing run, segment by segment as the accuracy pass does: its whole time."""
        segment = segment_steps(observed.size, hmm.n_states)
        return timed_whole(
            lambda: deque(smoothing_chunks(hmm, observed, checkpoint=segment), maxlen=0),
            observed.size,
        )

    def run_bytes(self, steps: int, n_states: int) -> int:
        """The beliefs of a segment, the checkpoints before the later segments and the
        backward message."""
        segment = segment_steps(steps, n_states)
        checkpoints = -(-steps // segment) - 1
        return (segment + checkpoints + 1) * 8 * n_states

    def likelihood_bytes(self, steps: int, n_states: int) -> int:
        """A segment's likelihood rows, read with two transient copies (the emission's
        columns, transposed and scaled: measured)."""
        return 3 * 8 * n_states * min(segment_steps(steps, n_states), 32)

    def section(self, ds, kit):
        table = sections.table(
            ds,
            kit,
            self.name,
            header=["largest TV over steps", "filtering TV, last step"],
            row=_smoothing_row,
            empty="No smoothing cell has a value.",
        )
        return ["## Smoothing", "", SMOOTHING, "", table, ""]

    def figures(self, ds, kit):
        figure = sections.per_model_figure(
            ds,
            kit,
            self.name,
            ["tv_max"],
            "Smoothing: largest TV over steps between exact and approximate posteriors "
            "P(S_t | o_0..o_{T-1})\nmarker: median over seeds; bar: least to largest seed "
            "(a value of 0 is not drawn on the log axis)",
        )
        (axis,) = figure.axes
        axis.set(ylabel="largest TV over steps")
        kit.log_scale(axis, "y")
        return {"smoothing.png": figure}


def _smoothing_row(ds, where: dict) -> list[str] | None:
    """The largest TV over steps, beside filtering's TV at the last step (the run's own
    posterior there) where the run filtered; None where no done cell has it."""
    largest = finite_median(sections.done(ds, where, "smooth", "tv_max"))
    if not np.isfinite(largest):
        return None
    filtered = "filter" in ds["mode"].values
    last = ds.isel(t=-1)
    tv = finite_median(sections.done(last, where, "filter", "tv")) if filtered else np.nan
    return [f"{largest:.3g}", f"{tv:.3g}" if np.isfinite(tv) else "-"]


MODE = Smooth()
