"""Progress of a sweep: a bar on a terminal or in a notebook, plain periodic lines otherwise."""

from __future__ import annotations

import datetime
import sys
import time
from typing import TextIO


def _notebook(stream: TextIO) -> bool:
    """Whether ``stream`` is a Jupyter kernel's output, which redraws a line on ``\\r``
    (but shows terminal escape codes as they are)."""
    return type(stream).__module__.startswith("ipykernel")


class Progress:
    """Counts finished cells out of ``total`` (``already`` were done by earlier runs)."""

    def __init__(
        self, total: int, already: int = 0, *, interval: float = 10.0, stream: TextIO | None = None
    ):
        self.total, self.already = total, already
        self.finished = self.failed = 0
        self.shown: tuple[int, int] | None = None  # the counts of the last line shown
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.notebook = _notebook(self.stream)
        self.bar = self.tty or self.notebook
        self.interval = 0.2 if self.bar else interval
        self.start = self.last = time.monotonic()
        self.first: tuple[float, int] | None = None
        """When cells first finished, and how many: rates count from there, so neither the
        cluster's start nor the first tasks' compilation stretch the ETA."""

    def advance(self, finished: int = 0, failed: int = 0) -> None:
        now = time.monotonic()
        if self.first is None and finished:
            self.first = (now, finished)
        self.finished += finished
        self.failed += failed
        if now - self.last >= self.interval:
            self.last = now
            self._show()

    def rate(self) -> float | None:
        """Cells per second since the first cells finished; None before a second moment."""
        if self.first is None:
            return None
        since, counted = self.first
        elapsed = time.monotonic() - since
        if self.finished <= counted or elapsed <= 0:
            return None
        return (self.finished - counted) / elapsed

    def line(self) -> str:
        done = self.already + self.finished
        left = self.total - done - self.failed
        rate = self.rate()
        failed = f", {self.failed} failed" if self.failed else ""
        if left == 0:
            return f"{done}/{self.total} cells{failed}, {time.monotonic() - self.start:.0f} s"
        if rate is None:
            return f"{done}/{self.total} cells{failed}, ETA after the first cells"
        eta = datetime.timedelta(seconds=round(left / rate))
        return f"{done}/{self.total} cells{failed}, {rate:.2f} cells/s, ETA {eta}"

    def _show(self) -> None:
        self.shown = (self.finished, self.failed)
        if self.bar:
            width = 30
            filled = int(width * (self.already + self.finished) / max(self.total, 1))
            bar = "#" * filled + "-" * (width - filled)
            # a terminal clears the rest of the line; a notebook pads it (no escape codes)
            end = "\033[K" if self.tty else " " * 8
            self.stream.write(f"\r[{bar}] {self.line()}{end}")
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.shown != (self.finished, self.failed):
            self._show()
        if self.bar:
            self.stream.write("\n")
        self.stream.flush()
