"""How many of a sweep's tasks exist and have finished, counted on the scheduler.

A sweep's cells may finish only at the end of a model's work (a fused model's cells come
back together, a large model's after its build, gamma and exact reference), so counting
cells alone leaves the progress still for minutes. ``TaskCount`` counts on the scheduler
every task one client submitted (intermediate ones included: models, gamma, references,
approximations, cells) and each that finished, once, however often it ran.
"""

from __future__ import annotations

import contextlib

from distributed import Client
from distributed.diagnostics.plugin import SchedulerPlugin


class TaskCount(SchedulerPlugin):
    """On the scheduler: the keys the client ``client_id`` submitted, and those finished."""

    name = "pipeline-task-count"

    def __init__(self, client_id: str):
        self.client_id = client_id
        self.submitted: set = set()
        self.finished: set = set()

    def update_graph(self, scheduler, *, client: str, tasks: list, **kwargs) -> None:
        if client == self.client_id:
            self.submitted.update(tasks)

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if finish == "memory" and key in self.submitted:
            self.finished.add(key)


def _counts(dask_scheduler, name: str) -> tuple[int, int]:
    plugin = dask_scheduler.plugins[name]
    return len(plugin.finished), len(plugin.submitted)


class Tasks:
    """``with Tasks(client) as tasks:`` counts the client's tasks from now on; ``tasks()`` is
    (finished, submitted) so far."""

    def __init__(self, client: Client):
        self.client = client

    def __enter__(self) -> Tasks:
        self.client.register_plugin(TaskCount(self.client.id))
        return self

    def __call__(self) -> tuple[int, int]:
        return self.client.run_on_scheduler(_counts, name=TaskCount.name)

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(OSError, TimeoutError, ValueError):  # a scheduler gone
            self.client.unregister_scheduler_plugin(TaskCount.name)
