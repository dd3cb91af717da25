"""Where a sweep's messages go: the terminal gets the sweep's own lines, the run's log file
(Hydra's ``main.log``) everything else.

While a sweep runs, distributed's messages (a worker restarted, a task lost, a port taken),
Python warnings (``Port 8787 is already in use``) and one line per failed cell go to the
log file rather than the terminal; the workers of a local cluster write their own log lines
(a task's traceback) there too. Where no log file is configured (a sweep run from Python),
everything stays where it was.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from distributed import WorkerPlugin

DISTRIBUTED_LOGGERS = ("distributed", "distributed.client", "distributed.gc")
"""The loggers distributed gives handlers of their own (``distributed.client`` warns "Couldn't
gather keys, rescheduling" when a worker dies under a task)."""
CELLS = logging.getLogger("pipeline.sweep.cells")
"""One line per failed cell: to the log file where there is one."""
FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"
"""The lines workers write to the log file, as Hydra's own."""
WARNINGS = "py.warnings"
"""The logger ``logging.captureWarnings`` sends Python warnings to."""


def log_files() -> list[logging.FileHandler]:
    """The file handlers of the root logger: the run's log file (none from Python)."""
    return [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]


@contextlib.contextmanager
def to_the_log_file() -> Iterator[Path | None]:
    """Route distributed's messages, Python warnings and each failed cell's line to the run's
    log file while the block runs; the file's path (None: there is none, nothing changes)."""
    files = log_files()
    if not files:
        yield None
        return
    loggers = [logging.getLogger(name) for name in (*DISTRIBUTED_LOGGERS, WARNINGS)] + [CELLS]
    before = [(logger.handlers[:], logger.propagate) for logger in loggers]
    handlers: list[logging.Handler] = [*files]
    for logger in loggers:
        logger.handlers, logger.propagate = handlers, False
    logging.captureWarnings(True)
    try:
        yield Path(files[0].baseFilename)
    finally:
        logging.captureWarnings(False)
        for logger, (handlers, propagate) in zip(loggers, before, strict=True):
            logger.handlers, logger.propagate = handlers, propagate


class WorkerLog(WorkerPlugin):
    """A local cluster's workers log to the run's log file (``path``, on this machine), or,
    without one, only errors to the terminal they share with the sweep."""

    name = "pipeline-worker-log"

    def __init__(self, path: Path | None = None):
        self.path = None if path is None else str(path)

    def setup(self, worker) -> None:
        logger = logging.getLogger("distributed")
        if self.path is None:
            logger.setLevel(logging.ERROR)
            return
        handler = logging.FileHandler(self.path)
        handler.setFormatter(logging.Formatter(FORMAT))
        logger.handlers = [handler]
        logger.propagate = False
