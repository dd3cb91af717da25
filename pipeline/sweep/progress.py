"""Progress of a sweep: a bar on a terminal, plain periodic lines otherwise."""

from __future__ import annotations

import datetime
import sys
import time
from typing import TextIO


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
        self.interval = 0.2 if self.tty else interval
        self.start = self.last = time.monotonic()

    def advance(self, finished: int = 0, failed: int = 0) -> None:
        self.finished += finished
        self.failed += failed
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._show()

    def line(self) -> str:
        done = self.already + self.finished
        elapsed = time.monotonic() - self.start
        rate = self.finished / elapsed if elapsed > 0 else 0.0
        left = self.total - done - self.failed
        eta = datetime.timedelta(seconds=round(left / rate)) if rate > 0 else "?"
        failed = f", {self.failed} failed" if self.failed else ""
        return f"{done}/{self.total} cells{failed}, {rate:.2f} cells/s, ETA {eta}"

    def _show(self) -> None:
        self.shown = (self.finished, self.failed)
        if self.tty:
            width = 30
            filled = int(width * (self.already + self.finished) / max(self.total, 1))
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r[{bar}] {self.line()}\033[K")
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.shown != (self.finished, self.failed):
            self._show()
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()
