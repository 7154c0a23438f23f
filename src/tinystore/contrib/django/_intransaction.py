"""The tasks a thread's open transaction holds: read back before the commit, and run inside a TestCase.

A task enqueued inside ``transaction.atomic`` is a job written on Django's
connection: until the block commits, no other connection sees it, neither
the store's reads nor its workers. This thread knows what it enqueued
there: each such task registers an ``on_commit`` callback, and Django's
list of those (which drops the callbacks of a savepoint rolled back) says
which tasks the open transaction still holds. Once it commits, the
callback does nothing: the workers run the job.

A ``django.test.TestCase`` runs each test in a transaction that never
commits, so its tasks never reach a worker. There ``run_until_idle`` runs
them itself, in the test's thread and transaction (which sees the test's
rows), as Django's ImmediateBackend runs a task: once, a task that raises
is FAILED. A KeyboardInterrupt in a task stops the tests, as there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import connections, transaction
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils.json import normalize_json

from ._results import describe, when
from ._execute import worker_id

if TYPE_CHECKING:
    from ._backend import TaskBackend


class Enqueued:
    """The on_commit callback of a task enqueued inside transaction.atomic: it marks the task, and does
    nothing once the transaction commits."""

    def __init__(self, alias: str, result: TaskResult):
        self.alias = alias
        self.result = result

    def __call__(self) -> None:
        pass


def hold(backend: "TaskBackend", result: TaskResult) -> None:
    """Remember ``result`` as a task of the open transaction on the backend's database."""
    transaction.on_commit(Enqueued(backend.alias, result), using=backend.database)


def held(backend: "TaskBackend") -> list[TaskResult]:
    """The tasks of ``backend`` that this thread enqueued in its open transaction, in order."""
    connection = connections[backend.database]
    if not connection.in_atomic_block:
        return []
    # run_on_commit: Django's (sids, callback, robust) list, which captureOnCommitCallbacks reads too
    return [c.result for _, c, _ in connection.run_on_commit if isinstance(c, Enqueued) and c.alias == backend.alias]


def in_test_transaction(backend: "TaskBackend") -> bool:
    """Whether the open transaction is a TestCase's, which rolls back when the test ends: its outermost
    atomic block is one the TestCase opened (``_from_testcase``, which Django marks it with)."""
    blocks = connections[backend.database].atomic_blocks
    return bool(blocks) and getattr(blocks[0], "_from_testcase", False)


def run_held(backend: "TaskBackend") -> None:
    """Run the due tasks of the open transaction, each once, until none is left; the tasks they enqueue too."""
    while True:
        now = when(backend.store.clock.now())
        due = [r for r in held(backend) if r.status == TaskResultStatus.READY
               and (r.task.run_after is None or r.task.run_after <= now)]
        if not due:
            return
        for result in due:
            _run(backend, result)


def _run(backend: "TaskBackend", result: TaskResult) -> None:
    started = when(backend.store.clock.now())
    _set(result, status=TaskResultStatus.RUNNING, started_at=started, last_attempted_at=started)
    result.worker_ids.append(worker_id())
    task_started.send(type(backend), task_result=result)
    try:
        context = [TaskContext(task_result=result)] if result.task.takes_context else []
        value = normalize_json(result.task.call(*context, *result.args, **result.kwargs))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        result.errors.append(describe(exc))
        _set(result, status=TaskResultStatus.FAILED, finished_at=when(backend.store.clock.now()))
    else:
        _set(result, status=TaskResultStatus.SUCCESSFUL, finished_at=when(backend.store.clock.now()),
             _return_value=value)
    task_finished.send(type(backend), task_result=result)


def _set(result: TaskResult, **changes: Any) -> None:
    for name, value in changes.items():
        object.__setattr__(result, name, value)
