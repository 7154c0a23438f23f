"""The handler of a worker's queues: import the task a job names, call it, keep what it returned."""

from __future__ import annotations

import os
import socket
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils.json import normalize_json

import tinystore

from ._results import describe, load_task, make_result, note_attempt, when

if TYPE_CHECKING:
    from ._backend import TaskBackend


class TaskHandler:
    """The handler of a task backend's queues: a ``def`` (it runs in a worker's thread, where Django's ORM
    may block). Every task backend's handler runs the task a job names, so any two are equal: a queue
    served again, by a backend Django made anew or by another backend of the same database, keeps one
    handler, the newest (a queue refuses a second handler that is not equal to its own)."""

    def __init__(self, backend: "TaskBackend"):
        self.backend = backend

    def __call__(self, payload: Any, run: tinystore.Run) -> dict[str, Any]:
        return execute(self.backend, payload, run)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskHandler)

    def __hash__(self) -> int:
        return hash(TaskHandler)

    def __repr__(self) -> str:
        return f"<task backend {self.backend.alias!r}'s handler>"


def execute(backend: "TaskBackend", payload: Any, run: tinystore.Run) -> dict[str, Any]:
    """Run the job's task; what it returns is kept with when it began and ended, and the worker's name.

    A task that raises fails the attempt, which is retried as the queue's
    options say; so does one that raises SystemExit or KeyboardInterrupt: a
    worker stops on SIGTERM and SIGINT, never on what a task raises. The
    exception gets a note of the attempt's worker and times, which the store
    keeps with its error. Django's ``task_started`` and ``task_finished`` are
    sent for each attempt. Database connections past their age are closed
    before and after, as Django does around a request.
    """
    task = load_task(payload, run.queue, run.id, backend.alias)
    worker = worker_id()
    started = backend.store.clock.now()
    running = make_result(backend, task, run.id, TaskResultStatus.RUNNING, payload, run.attempt, worker,
                          started=started)
    task_started.send(type(backend), task_result=running)
    close_old_connections()
    try:
        context = [TaskContext(task_result=running)] if task.takes_context else []
        value = normalize_json(task.call(*context, *payload["args"], **payload["kwargs"]))
    except BaseException as exc:
        ended = backend.store.clock.now()
        _finished(backend, running, TaskResultStatus.FAILED, finished_at=when(ended), errors=[describe(exc)])
        note_attempt(exc, worker, started, ended)
        raise
    finally:
        close_old_connections()
    finished = backend.store.clock.now()
    _finished(backend, running, TaskResultStatus.SUCCESSFUL, finished_at=when(finished), return_value=value)
    return {"return_value": value, "started_at": started, "finished_at": finished, "worker": worker}


def worker_id() -> str:
    """This process, as ``TaskResult.worker_ids`` names it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _finished(backend: "TaskBackend", running: TaskResult, status: TaskResultStatus, return_value: Any = None,
              **changes: Any) -> None:
    result = replace(running, status=status, **changes)
    object.__setattr__(result, "_return_value", return_value)
    task_finished.send(type(backend), task_result=result)
