"""Progress of a sweep: what it is preparing, then a bar on a terminal or in a notebook (plain
periodic lines otherwise) of its cells and tasks, and what a long cell says of itself.

A cell that runs for minutes (an HMM LM's training epochs) tells how far it is with
``cell_says`` from inside its task; the sweep follows those words (``follow``: Dask's
worker events, topic ``TOPIC``) and shows the latest at the end of its line and in its log.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

log = logging.getLogger("pipeline.sweep")

TOPIC = "pipeline-cell-progress"
"""The topic of the Dask worker events a cell's words travel on (``cell_says``, ``follow``)."""


def cell_says(cell: str, text: str) -> None:
    """Tell the sweep how far ``cell`` (its name, e.g. ``kernel_4 n=64 seed 0``) is: ``text``
    (``epoch 3, validation perplexity 812.4``). From a task on a Dask worker, a worker event
    the sweep's ``Progress`` shows; anywhere else (a cell run in the caller's process),
    nothing."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # not inside a task on a Dask worker
        return
    worker.log_event(TOPIC, {"cell": cell, "text": text})


def _notebook(stream: TextIO) -> bool:
    """Whether ``stream`` is a Jupyter kernel's output, which redraws a line on ``\\r``
    (but shows terminal escape codes as they are)."""
    return type(stream).__module__.startswith("ipykernel")


@contextlib.contextmanager
def follow(client, progress: Progress) -> Iterator[None]:
    """While in the block, what cells say of themselves on ``client``'s workers
    (``cell_says``) reaches ``progress.hear``."""

    def heard(event) -> None:
        _, said = event
        progress.hear(str(said["cell"]), str(said["text"]))

    client.subscribe_topic(TOPIC, heard)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, TimeoutError, RuntimeError):  # a scheduler gone
            client.unsubscribe_topic(TOPIC)


class Progress:
    """Counts finished cells out of ``total`` (``already`` were done by earlier runs) and,
    where ``tasks`` tells (a callable giving the sweep's finished and submitted tasks:
    ``taskcount.Tasks``), its tasks too: models, references and approximations finish long
    before their cells do.

    The ETA is the work left at the rate of the last ``window`` seconds (work: tasks where
    they are counted, else cells), so a slow start or a change of pace fades within minutes;
    it waits for work to finish, so the cluster's start never counts.
    """

    def __init__(
        self,
        total: int,
        already: int = 0,
        *,
        interval: float = 10.0,
        stream: TextIO | None = None,
        tasks: Callable[[], tuple[int, int]] | None = None,
        window: float = 180.0,
    ):
        self.total, self.already = total, already
        self.finished = self.failed = 0
        self.tasks, self.window = tasks, window
        self.work = (0, 0)  # tasks finished and submitted, as last counted
        self.shown: tuple | None = None  # the counts of the last line shown
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.notebook = _notebook(self.stream)
        self.bar = self.tty or self.notebook
        self.interval = 0.2 if self.bar else interval
        self.start = self.last = time.monotonic()
        self.samples: collections.deque[tuple[float, int]] = collections.deque()
        """(when, work done) at each line since work first finished: the rate's window."""
        self.said: list[tuple[str, str]] = []
        """What running cells said of themselves (``cell_says``), in order: (cell, text)."""

    def hear(self, cell: str, text: str) -> None:
        """Record what ``cell`` says of itself; the next line ends with the latest words.
        Called from Dask's event thread: only appends, the line is drawn by ``tick``."""
        self.said.append((cell, text))
        log.info("%s: %s", cell, text)

    def advance(self, finished: int = 0, failed: int = 0) -> None:
        """Count cells that finished or failed; show a line when it is time."""
        self.finished += finished
        self.failed += failed
        self.tick()

    def tick(self) -> None:
        """Show a line when ``interval`` has passed (counting the tasks then)."""
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._count(now)
            self._show()

    def _count(self, now: float) -> None:
        if self.tasks is not None:
            with contextlib.suppress(OSError, TimeoutError):  # a scheduler that is gone
                self.work = self.tasks()
        done = self.work[0] if self.tasks is not None else self.finished
        if done and (not self.samples or done != self.samples[-1][1]):
            self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[1][0] > self.window:
            self.samples.popleft()

    def rate(self) -> float | None:
        """Work (tasks, else cells) per second over the window; None before two moments."""
        if len(self.samples) < 2:
            return None
        (since, before), (until, after) = self.samples[0], self.samples[-1]
        return (after - before) / (until - since) if until > since else None

    def line(self) -> str:
        done = self.already + self.finished
        failed = f", {self.failed} failed" if self.failed else ""
        counted = f", tasks {self.work[0]}/{self.work[1]}" if self.tasks is not None else ""
        if done + self.failed == self.total:
            return (
                f"{done}/{self.total} cells{failed}{counted}, {time.monotonic() - self.start:.0f} s"
            )
        rate = self.rate()
        unit = "tasks" if self.tasks is not None else "cells"
        words = "; {}: {}".format(*self.said[-1]) if self.said else ""
        if rate is None or rate <= 0:
            return f"{done}/{self.total} cells{failed}{counted}, ETA after the first {unit}{words}"
        left = (
            self.work[1] - self.work[0]
            if self.tasks is not None
            else self.total - done - self.failed
        )
        eta = datetime.timedelta(seconds=round(left / rate))
        return f"{done}/{self.total} cells{failed}{counted}, {rate:.2f} {unit}/s, ETA {eta}{words}"

    def _show(self) -> None:
        self.shown = (self.finished, self.failed, self.work, len(self.said))
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
        self._count(time.monotonic())
        if self.shown != (self.finished, self.failed, self.work, len(self.said)):
            self._show()
        if self.bar:
            self.stream.write("\n")
        self.stream.flush()


class Stages:
    """Says what a sweep is preparing (checking the config, estimating memory, reading model
    files) once preparing has taken ``after`` seconds, and every later stage as it starts:
    a quick preparation prints nothing, a slow one is never silent for long."""

    def __init__(self, *, after: float = 2.0, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.current: str | None = None
        self.late = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(after, self._waited)
        self._timer.daemon = True
        self._timer.start()

    def _waited(self) -> None:
        with self._lock:
            self.late = True
            if self.current:
                self._say(self.current)

    def _say(self, what: str) -> None:
        self.stream.write(f"preparing: {what}\n")
        self.stream.flush()

    def __call__(self, what: str) -> None:
        with self._lock:
            self.current = what
            if self.late:
                self._say(what)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            self.current = None
