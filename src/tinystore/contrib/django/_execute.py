"""The handler of a worker's queues: import the task a job names, call it, keep what it returned."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any, Callable

from django.db import close_old_connections
from django.tasks import TaskContext, TaskResultStatus
from django.utils.json import normalize_json

import tinystore

from ._results import load_task, make_result

if TYPE_CHECKING:
    from ._backend import TaskBackend


def handler_for(backend: "TaskBackend") -> Callable[[Any, tinystore.Run], dict[str, Any]]:
    """A ``def`` handler (it runs in a worker's thread, where Django's ORM may block) for ``backend``."""
    def run_task(payload: Any, run: tinystore.Run) -> dict[str, Any]:
        return execute(backend, payload, run)
    return run_task


def execute(backend: "TaskBackend", payload: Any, run: tinystore.Run) -> dict[str, Any]:
    """Run the job's task; what it returns is kept with when it began and ended, and the worker's name.

    A task that raises fails the attempt, which is retried as the queue's
    options say. Database connections past their age are closed before and
    after, as Django does around a request.
    """
    task = load_task(payload, run.queue, run.id)
    worker = f"{socket.gethostname()}:{os.getpid()}"
    started = backend.store.clock.now()
    close_old_connections()
    try:
        if task.takes_context:
            running = make_result(backend, task, run.id, TaskResultStatus.RUNNING, payload, run.attempt, worker,
                                  started=started)
            value = task.call(TaskContext(task_result=running), *payload["args"], **payload["kwargs"])
        else:
            value = task.call(*payload["args"], **payload["kwargs"])
    finally:
        close_old_connections()
    return {"return_value": normalize_json(value), "started_at": started,
            "finished_at": backend.store.clock.now(), "worker": worker}
