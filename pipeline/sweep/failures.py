"""Why cells failed, whether running them again can help, and the lines that say so.

A task that raises is not run again by the scheduler: an exception of the sweep's pure
computations (a ``ValueError`` from a plug-in, say) is deterministic, the same on every
attempt, and is reported once. Only what another attempt may not meet is tried again, up
to ``retries`` times: a worker short of memory or a lost connection (``TRANSIENT``), and a
task whose worker died under it (the scheduler's ``allowed-failures``). The terminal gets
one line per distinct reason with the cells it hit; each cell's line goes to the run's log.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from distributed import Client, KilledWorker

TRANSIENT = (MemoryError, ConnectionError, TimeoutError)
"""Exceptions a task may not raise on another attempt: tried again up to ``retries`` times."""


class Failure(NamedTuple):
    """Why a task did not finish, in one line, and whether running it again can help."""

    message: str
    rerun: bool


def _message(error: BaseException) -> str:
    first = str(error).strip().splitlines()
    return f"{type(error).__name__}: {first[0] if first else ''}"[:500]


class CellError(NamedTuple):
    """What a task computing several cells returns for one that raised, so the others are
    kept: the exception's one line (deterministic: ``TRANSIENT`` ones fail the task)."""

    message: str

    @classmethod
    def of(cls, error: BaseException) -> CellError:
        return cls(_message(error))


def transient(future) -> bool:
    """Whether ``future`` erred with an exception another attempt may not meet."""
    return future.status == "error" and isinstance(future.exception(), TRANSIENT)


def describe(client: Client, future) -> Failure:
    """Why ``future`` did not finish: the task's exception (deterministic unless
    ``TRANSIENT``), or its workers died under it; one of them restarted for memory (its
    nanny's ``worker-restart-memory`` event) ran out of memory."""
    if future.status != "error":
        return Failure(f"the task was {future.status}", rerun=True)
    error = future.exception()
    if not isinstance(error, KilledWorker):
        return Failure(_message(error), rerun=isinstance(error, TRANSIENT))
    restarted = {event["worker"] for _, event in client.get_events("worker-restart-memory")}
    worker = error.last_worker
    limit = getattr(worker, "memory_limit", 0) or 0
    attempts = error.allowed_failures + 1
    if restarted:  # the last worker is one of those that died: some did for memory
        return Failure(
            f"ran out of memory on a worker (limit {limit / 2**30:.2f} GiB; "
            f"{attempts} attempt{'s' if attempts > 1 else ''})",
            rerun=True,
        )
    return Failure(
        f"KilledWorker: {attempts} workers died running it "
        f"(last {getattr(worker, 'address', '?')})",
        rerun=True,
    )


class Failures:
    """The failed cells of a sweep, grouped by why."""

    def __init__(self):
        self.cells: dict[Failure, list] = defaultdict(list)

    def add(self, failure: Failure, cells: list) -> None:
        self.cells[failure].extend(cells)

    def __len__(self) -> int:
        return sum(len(cells) for cells in self.cells.values())

    @property
    def rerun(self) -> bool:
        """Whether running the sweep again can help some of them."""
        return any(failure.rerun for failure in self.cells)

    def lines(self) -> list[str]:
        """One line per reason, in the order of their first cells: how many cells it failed,
        which, and why."""
        found = []
        for failure, cells in sorted(self.cells.items(), key=lambda item: item[1][0]):
            first = ", ".join(map(str, cells[0]))
            more = f" and {len(cells) - 1} more" if len(cells) > 1 else ""
            found.append(
                f"{len(cells)} cell{'s' if len(cells) > 1 else ''} failed ({first}{more}): "
                f"{failure.message}"
            )
        return found

    def closing(self) -> str:
        """The sweep's last line about them: a rerun retries only what it can change."""
        if self.rerun:
            return (
                f"{len(self)} cells failed; see the `error` variable. Run the same command "
                "again to retry them."
            )
        return (
            f"{len(self)} cells failed with errors a rerun repeats (above; each cell's in the "
            "`error` variable): fix their cause, then run the same command again."
        )
