"""TaskBackend: Django's tasks as tinystore jobs, in a database of the Django project."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Optional

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.transaction import TransactionManagementError
from django.tasks import Task, TaskResult
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone
from django.utils.json import normalize_json

import tinystore
from tinystore._options import parse_options
from tinystore._values import QUEUE_NAME

from . import _intransaction
from ._execute import TaskHandler
from ._results import load_task, task_result
from ._stores import store_for, target_of

DEFAULT_QUEUE = "default"  # Django's queue_name unless a task says otherwise
RESULTS_KEPT = "7d"  # a done task's result (dedupe), as long as a failed one's error (keep), unless queue_options say
OPTIONS = ("database", "schema", "direct", "queue_options")


class TaskBackend(BaseTaskBackend):  # type: ignore[misc]  # Django ships no types: its base class is Any to mypy
    """Tasks enqueued as jobs of the tinystore queue named by their ``queue_name``, in the Django database
    named by ``OPTIONS["database"]`` (``"default"`` unless given).

    Inside ``transaction.atomic`` on that database, a task commits with the
    block's rows or not at all; outside one it commits at once. ``run_after``
    is the job's time and ``priority`` its priority (the same range, -100 to
    100: among a queue's due tasks the highest starts first). ``OPTIONS["queue_options"]`` gives each queue
    tinystore's options (``{"emails": {"attempts": 3, "timeout": "5m"}}``); a
    done task's result is kept 7 days (``dedupe``) unless they say otherwise.
    ``OPTIONS["schema"]`` is where tinystore's tables are on PostgreSQL; where the database's HOST is a
    pooler in transaction mode (PgBouncer), ``OPTIONS["direct"]`` is a URL of the same database that reaches
    the server itself, which the worker's session uses (``tinystore.open``'s ``direct=``).

    ``QUEUES = []`` allows every queue, as Django says: the worker then serves every queue the store holds
    (``default`` among them), and ``get_result`` looks in each. ``aenqueue`` and ``aget_result`` await the
    store (``add_async``, ``get_async``) without a thread of their own.
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]):
        super().__init__(alias, params)
        unknown = sorted(set(self.options) - set(OPTIONS))
        if unknown:
            raise ImproperlyConfigured(f"task backend {alias!r}: unknown OPTIONS {', '.join(unknown)}; "
                                       f"it takes {', '.join(OPTIONS)}")
        self.database: str = self.options.get("database", DEFAULT_DB_ALIAS)
        self.schema: Optional[str] = self.options.get("schema")
        self.direct: Optional[str] = self.options.get("direct")
        self.queue_options: dict[str, dict[str, Any]] = self.options.get("queue_options", {})
        self._queues: dict[str, tinystore.Queue] = {}
        self._queues_of: Optional[tinystore.Store] = None  # the store of _queues: another once it was closed
        self._lock = threading.Lock()

    @property
    def store(self) -> tinystore.Store:
        """The store in the Django database named by ``OPTIONS["database"]``, opened on first use."""
        return store_for(self.database, self.schema, self.direct)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """``manage.py check``: the database must be a SQLite file or a PostgreSQL database, and QUEUES
        must name the queues."""
        found = []
        try:
            target_of(self.database)
        except ImproperlyConfigured as exc:
            found.append(checks.Error(str(exc), obj=f"TASKS[{self.alias!r}]", id="tinystore.E001"))
        return found

    def queue_names(self) -> list[str]:
        """The queues this backend's tasks may be in: QUEUES, or where it is empty (every queue) every queue
        the store holds now, and ``default``."""
        if self.queues:
            return sorted(self.queues)
        return sorted(set(self.store.queues()) | {DEFAULT_QUEUE})

    def validate_task(self, task: Task) -> None:
        """Django's checks of a task, and its ``queue_name`` one that tinystore takes as a queue's name."""
        super().validate_task(task)
        if not QUEUE_NAME.fullmatch(task.queue_name):
            raise InvalidTask(f"task {task.module_path}: queue_name={task.queue_name!r} is not a tinystore queue "
                              f"name, which matches [a-z0-9][a-z0-9_-]{{0,63}}")

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Add the task as a job of its queue, in the open ``transaction.atomic`` block where there is one
        (it commits with the block's rows, or not at all), else committed at once; its result, READY."""
        queue, payload, run_after = self._job_of(task, args, kwargs)
        connection = self._atomic_connection()
        job = queue.add(payload, at=run_after, priority=int(task.priority), conn=connection)
        result = task_result(self, task, job)
        if connection is not None:
            _intransaction.hold(self, result)
        task_enqueued.send(type(self), task_result=result)
        return result

    async def aenqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """``enqueue`` for async code: the add is awaited (``add_async``), committed at once (an async view
        holds no ``transaction.atomic`` block of its own)."""
        queue, payload, run_after = self._job_of(task, args, kwargs)
        job = await queue.add_async(payload, at=run_after, priority=int(task.priority))
        result = task_result(self, task, job)
        await task_enqueued.asend(type(self), task_result=result)
        return result

    def _job_of(self, task: Task, args: Any, kwargs: Any) -> tuple[tinystore.Queue, dict[str, Any], Any]:
        """The task's queue, its job's payload, and its time, every check made."""
        self.validate_task(task)
        queue = self.queue(task.queue_name)
        run_after = _aware(task.run_after)
        try:
            payload = {"task": task.module_path, "args": normalize_json(args), "kwargs": normalize_json(kwargs),
                       "enqueued_at": self.store.clock.now(),
                       "run_after": run_after.timestamp() if run_after is not None else None}
        except (TypeError, ValueError) as exc:  # Django's contract: arguments that are not JSON are a TypeError
            raise TypeError(f"task {task.module_path}: its arguments must be JSON ({exc}) (queue {queue.name!r})"
                            ) from None
        return queue, payload, run_after

    def get_result(self, result_id: str) -> TaskResult:
        """The task's result as the store keeps it; for a task this thread enqueued in its open transaction,
        which no other connection sees before the commit, as this thread knows it."""
        for result in _intransaction.held(self):
            if result.id == result_id:
                return result
        for queue in (self.queue(name) for name in self.queue_names()):
            job = queue.get(result_id)
            if job is not None:
                return task_result(self, load_task(job.payload, queue.name, job.id, self.alias), job)
        raise self._no_result(result_id)

    async def aget_result(self, result_id: str) -> TaskResult:
        """``get_result`` for async code: each read awaited (``get_async``)."""
        for queue in (self.queue(name) for name in self.queue_names()):
            job = await queue.get_async(result_id)
            if job is not None:
                return task_result(self, load_task(job.payload, queue.name, job.id, self.alias), job)
        raise self._no_result(result_id)

    def _no_result(self, result_id: str) -> TaskResultDoesNotExist:
        return TaskResultDoesNotExist(f"no task {result_id!r} in the queues of task backend {self.alias!r}")

    def queue(self, name: str) -> tinystore.Queue:
        """The tinystore queue of ``name``, with its ``queue_options`` kept in the store for every process."""
        with self._lock:
            store = self.store
            if self._queues_of is not store:
                self._queues, self._queues_of = {}, store
            queue = self._queues.get(name)
            if queue is None:
                options = {"dedupe": RESULTS_KEPT, **self.queue_options.get(name, {})}
                self._check_unlocked(store, name, options)
                queue = self._queues[name] = store.queue(name, **options)
            return queue

    def _check_unlocked(self, store: tinystore.Store, name: str, options: dict[str, Any]) -> None:
        """Refuse to write a queue's options inside an atomic block on SQLite, where the write would wait
        for the write lock that Django's own connection holds. The app makes the queues of QUEUES ready
        when Django connects; options the store keeps already need no write."""
        connection = connections[self.database]
        if connection.vendor != "sqlite" or not connection.in_atomic_block:
            return
        if name in store.queues():
            kept = store.queue(name).options  # read only: the store keeps the queue
            if parse_options(kept, options) == kept:
                return
        raise ImproperlyConfigured(
            f"task backend {self.alias!r}: queue {name!r} is first used, or its queue_options changed, inside "
            f"transaction.atomic, while Django holds the write lock of the SQLite file that tinystore must write "
            f"the queue's options to: add 'tinystore.contrib.django' to INSTALLED_APPS and {name!r} to QUEUES "
            f"(the queue is then ready when Django connects), or use the queue once outside the block after "
            f"changing its options")

    def serve_queues(self, names: list[str]) -> None:
        """Register the handler that runs this backend's tasks on the queues ``names``."""
        for name in names:
            self.queue(name).work(TaskHandler(self))

    def run_until_idle(self) -> None:
        """Run the due tasks of QUEUES in this process; return once none is due and none runs (for tests
        and scripts; ``manage.py tinystore_worker`` serves them).

        Inside a ``django.test.TestCase``, whose transaction never commits,
        it runs the due tasks enqueued in that transaction, in this thread
        (see ``_intransaction``). Inside any other ``transaction.atomic`` it
        raises TransactionManagementError: the tasks enqueued in the block
        are not committed, so no worker can see them (and on SQLite the
        block holds the write lock the workers need).
        """
        if connections[self.database].in_atomic_block:
            if not _intransaction.in_test_transaction(self):
                raise TransactionManagementError(
                    f"task backend {self.alias!r}: run_until_idle() inside transaction.atomic cannot run the "
                    f"tasks enqueued in the block, which no worker sees before the commit: call it after the "
                    f"block (in a django.test.TestCase it runs the test's tasks in the test's transaction)")
            _intransaction.run_held(self)
            return
        self.serve_queues(self.queue_names())
        self.store.run_until_idle()

    def _atomic_connection(self) -> Any:
        """The driver connection of the Django database when an atomic block is open on it: the job then
        commits with the block. Outside one, the job commits by itself, as Django's autocommit does."""
        connection = connections[self.database]
        return connection.connection if connection.in_atomic_block else None


def _aware(run_after: Optional[datetime]) -> Optional[datetime]:
    """``run_after`` as an aware datetime: a naive one (USE_TZ = False) is in Django's TIME_ZONE."""
    if run_after is None or timezone.is_aware(run_after):
        return run_after
    aware: datetime = timezone.make_aware(run_after)
    return aware
