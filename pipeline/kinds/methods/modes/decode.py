"""The ``decode`` mode: the most probable state path (``pipeline.inference.viterbi``) of the
approximate model against the exact model's, on ``filter``'s observations.

A cell measures how far the two paths are apart (``path_disagreement``,
``log_probability_gap`` under the exact model, ``paths_equal``); its reference is the exact
path, and its runs follow one another (one run's memory). Belief pruning has no Viterbi
counterpart, and a low-rank matrix too large for the max-product step no run: such a cell
measures nothing (NaN, the schema's ``missing`` says why).
"""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM
from pipeline.inference import ViterbiResult, path_log_probability, viterbi
from pipeline.inference.decoder import POINTER_BYTES
from pipeline.inference.smoother import checkpoint_steps
from pipeline.kinds.methods.modes import sections
from pipeline.kinds.methods.modes.base import Disk, Exact, Mode, nothing, timed_whole
from pipeline.operators import check_max_product
from pipeline.results.schema import finite_median


def decodable(hmm: HMM) -> bool:
    """Whether Viterbi runs on ``hmm`` (a ``LowRank`` matrix above ``lowrank.MAX_DENSE``
    entries has no max-product step)."""
    try:
        check_max_product(hmm.transition)
    except ValueError:
        return False
    return True


DECODING = (
    "Viterbi with the approximate model against Viterbi with the exact one, on the same "
    "observations: the share of steps where the two most probable paths differ, and how much "
    "less probable the approximate path is under the exact model (log P(exact path, o) - "
    "log P(approximate path, o), never below 0 up to rounding), in "
    "[decoding.png](decoding.png). A path may differ at many steps and cost little "
    "probability where several paths are almost equally probable."
)


class Decode(Mode):
    name = registered = "decode"
    title = "Viterbi decoding"
    produces = frozenset(
        {"zero_evidence", "path_disagreement", "log_probability_gap", "paths_equal"}
    )
    unsupported = (
        "belief pruning (topp_states), which Viterbi does not do, and low-rank transitions too "
        "large for the max-product step"
    )
    line, line_name = ":", "dotted"
    held_runs = 1

    def supports(self, approximation) -> bool:
        """No belief pruning, and a max-product step."""
        return approximation.prune >= 1 and decodable(approximation.hmm)

    def reference(self, hmm: HMM, observed: np.ndarray, *, disk: Disk) -> Exact:
        """The exact model's Viterbi path (steps,), no run where it has no max-product step."""
        if not decodable(hmm):
            return Exact(None, np.nan, run=False)
        return Exact(None, np.nan, path=viterbi(hmm, observed).path)

    def measures(self, hmm, approximation, exact, *, gamma, threads, disk):
        """The approximate model's Viterbi path against the exact model's (``exact.path``):
        the fraction of steps where they differ, the gap of their log probabilities jointly
        with the observations under the exact model, whether they are equal, and the steps no
        approximate path could emit."""
        observed = exact.observations
        steps = observed.size
        if not self.supports(approximation):
            return nothing(steps)
        with threads():
            approx = viterbi(approximation.hmm, observed)
        assert isinstance(approx, ViterbiResult), "one sequence's"
        zero = approx.zero_evidence.size
        if exact.path is None:
            return nothing(steps, zero_evidence=zero)
        differ = approx.path != exact.path
        gap = path_log_probability(hmm, exact.path, observed) - path_log_probability(
            hmm, approx.path, observed
        )
        return nothing(
            steps,
            zero_evidence=zero,
            path_disagreement=float(differ.mean()),
            log_probability_gap=float(gap),
            paths_equal=float(not differ.any()),
        )

    def run(self, hmm: HMM, observed: np.ndarray, prune: float) -> np.ndarray:
        return timed_whole(lambda: viterbi(hmm, observed), observed.size)

    def segment(self, steps: int, n_states: int) -> int:
        """The steps a Viterbi run holds at a time: all, while its back-pointers take at most
        ``viterbi``'s ``POINTER_BYTES``, else ``ceil(sqrt(steps))``."""
        width = np.min_scalar_type(n_states - 1).itemsize
        return steps if steps * n_states * width <= POINTER_BYTES else checkpoint_steps(steps, None)

    def run_bytes(self, steps: int, n_states: int) -> int:
        """The back-pointers of a segment (the narrowest unsigned integers), the scaled maxima
        before each later segment and its own two."""
        segment = self.segment(steps, n_states)
        checkpoints = -(-steps // segment) - 1
        width = np.min_scalar_type(n_states - 1).itemsize
        return segment * n_states * width + (checkpoints + 2) * 8 * n_states

    def likelihood_bytes(self, steps: int, n_states: int) -> int:
        """A segment's likelihood rows, read with two transient copies."""
        return 3 * 8 * n_states * min(self.segment(steps, n_states), 32)

    def section(self, ds, kit):
        table = sections.table(
            ds,
            kit,
            self.name,
            header=["steps whose state differs", "log-prob. gap (nat)", "equal paths (seeds)"],
            row=_decoding_row,
            empty="No decoding cell has a value.",
        )
        return ["## Viterbi decoding", "", DECODING, "", table, ""]

    def figures(self, ds, kit):
        figure = sections.per_model_figure(
            ds,
            kit,
            self.name,
            ["path_disagreement", "log_probability_gap"],
            "Viterbi decoding: the approximate model's path against the exact model's\n"
            "marker: median over seeds; bar: least to largest seed",
        )
        left, right = figure.axes
        left.set(ylabel="share of steps whose state differs", ylim=(-0.03, 1.03))
        left.set_title("steps where the paths differ", fontsize=10)
        right.set_yscale("symlog", linthresh=0.1)
        # a gap is never below 0 but by rounding; room above the largest
        right.set_ylim(-0.03, max(right.get_ylim()[1], 1.0) * 2)
        right.set(ylabel="log P(exact path, o) - log P(approximate path, o) [nat]")
        right.set_title("log-probability gap under the exact model (0: as probable)", fontsize=10)
        return {"decoding.png": figure}


def _decoding_row(ds, where: dict) -> list[str] | None:
    """The share of steps where the approximate Viterbi path differs from the exact one, the
    gap of their log probabilities under the exact model (medians over seeds; inf: the exact
    model rules the approximate path out), in how many seeds the paths are equal; None where
    no done cell has them."""
    equal = sections.done(ds, where, "decode", "paths_equal")
    measured = ~np.isnan(equal)
    if not measured.any():
        return None
    differ = finite_median(sections.done(ds, where, "decode", "path_disagreement"))
    gap = sections.median(sections.done(ds, where, "decode", "log_probability_gap"))
    return [f"{differ:.1%}", f"{gap:.3g}", f"{int(equal[measured].sum())} of {int(measured.sum())}"]


MODE = Decode()
