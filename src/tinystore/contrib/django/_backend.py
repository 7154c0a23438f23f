"""TaskBackend: Django's tasks as tinystore jobs, in a database of the Django project."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Optional

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.tasks import Task, TaskResult
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone
from django.utils.json import normalize_json

import tinystore
from tinystore._values import QUEUE_NAME

from ._execute import handler_for
from ._results import load_task, task_result
from ._stores import store_for, target_of

RESULTS_KEPT = "7d"  # a done task's result (dedupe), as long as a failed one's error (keep), unless queue_options say
OPTIONS = ("database", "schema", "queue_options")


class TaskBackend(BaseTaskBackend):
    """Tasks enqueued as jobs of the tinystore queue named by their ``queue_name``, in the Django database
    named by ``OPTIONS["database"]`` (``"default"`` unless given).

    Inside ``transaction.atomic`` on that database, a task commits with the
    block's rows or not at all; outside one it commits at once. ``run_after``
    is the job's time and ``priority`` its priority (the same range, -100 to
    100: among a queue's due tasks the highest starts first). ``OPTIONS["queue_options"]`` gives each queue
    tinystore's options (``{"emails": {"attempts": 3, "timeout": "5m"}}``); a
    done task's result is kept 7 days (``dedupe``) unless they say otherwise.
    ``OPTIONS["schema"]`` is where tinystore's tables are on PostgreSQL.
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
        self.queue_options: dict[str, dict[str, Any]] = self.options.get("queue_options", {})
        self._queues: dict[str, tinystore.Queue] = {}
        self._lock = threading.Lock()

    @property
    def store(self) -> tinystore.Store:
        """The store in the Django database named by ``OPTIONS["database"]``, opened on first use."""
        return store_for(self.database, self.schema)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """``manage.py check``: the database must be a SQLite file or a PostgreSQL database."""
        try:
            target_of(self.database)
        except ImproperlyConfigured as exc:
            return [checks.Error(str(exc), obj=f"TASKS[{self.alias!r}]", id="tinystore.E001")]
        return []

    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        if not QUEUE_NAME.fullmatch(task.queue_name):
            raise InvalidTask(f"task {task.module_path}: queue_name={task.queue_name!r} is not a tinystore queue "
                              f"name, which matches [a-z0-9][a-z0-9_-]{{0,63}}")

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        queue = self.queue(task.queue_name)
        try:
            payload = {"task": task.module_path, "args": normalize_json(args), "kwargs": normalize_json(kwargs),
                       "enqueued_at": self.store.clock.now()}
        except (TypeError, ValueError) as exc:
            raise tinystore.InvalidArgument(f"task {task.module_path}: its arguments must be JSON ({exc})",
                                            queue=queue.name) from None
        job = queue.add(payload, at=_aware(task.run_after), priority=int(task.priority),
                        conn=self._atomic_connection())
        result = task_result(self, task, job)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        # QUEUES = [] allows any queue: then each queue the store keeps, as it is kept (nothing is written)
        queues = [self.queue(name) for name in sorted(self.queues)] or map(self.store.queue, self.store.queues())
        for queue in queues:
            job = queue.get(result_id)
            if job is not None:
                return task_result(self, load_task(job.payload, queue.name, job.id), job)
        raise TaskResultDoesNotExist(f"no task {result_id!r} in the queues of task backend {self.alias!r}")

    def queue(self, name: str) -> tinystore.Queue:
        """The tinystore queue of ``name``, with its ``queue_options`` kept in the store for every process."""
        with self._lock:
            queue = self._queues.get(name)
            if queue is None:
                self._check_unlocked(name)
                options = {"dedupe": RESULTS_KEPT, **self.queue_options.get(name, {})}
                queue = self._queues[name] = self.store.queue(name, **options)
            return queue

    def _check_unlocked(self, name: str) -> None:
        """Refuse to make a queue ready inside an atomic block on SQLite, where it would wait for the write
        lock that Django's own connection holds (the app makes the queues of QUEUES ready before)."""
        connection = connections[self.database]
        if connection.vendor == "sqlite" and connection.in_atomic_block:
            raise ImproperlyConfigured(
                f"task backend {self.alias!r}: queue {name!r} is first used inside transaction.atomic, while "
                f"Django holds the write lock of the SQLite file that tinystore must write its queue to: add "
                f"'tinystore.contrib.django' to INSTALLED_APPS and {name!r} to QUEUES, and the queue is ready "
                f"when Django connects")

    def serve_queues(self, names: list[str]) -> None:
        """Register the handler that runs this backend's tasks on the queues ``names``."""
        for name in names:
            self.queue(name).work(handler_for(self))

    def run_until_idle(self) -> None:
        """Run the due tasks of QUEUES in this process; return once none is due and none runs (for tests
        and scripts; ``manage.py tinystore_worker`` serves them)."""
        self.serve_queues(sorted(self.queues))
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
    return timezone.make_aware(run_after)
