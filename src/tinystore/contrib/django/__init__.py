"""tinystore as Django's task backend (Django 6's ``django.tasks``)::

    INSTALLED_APPS = [..., "tinystore.contrib.django"]
    TASKS = {"default": {"BACKEND": "tinystore.contrib.django.TaskBackend",
                         "OPTIONS": {"database": "default"}}}

A task enqueued inside ``transaction.atomic`` commits with it, or not at all;
``python manage.py tinystore_worker`` runs the tasks. The modules:

- ``_backend``   TaskBackend: checking tasks, enqueueing, reading results back
- ``_stores``    the store in a Django database's file or PostgreSQL database, one per process
- ``_results``   a job as Django's ``TaskResult``
- ``_intransaction``   the tasks of a thread's open transaction: read back before the commit, run in a TestCase
- ``_execute``   the handler that runs a task in a worker
- ``apps``, ``management/commands/tinystore_worker``   the app, and its command
"""

from typing import Any

__all__ = ["TaskBackend"]


def __getattr__(name: str) -> Any:
    # Imported when Django asks for it: listing the app in INSTALLED_APPS loads this package before
    # Django's apps are ready.
    if name == "TaskBackend":
        from ._backend import TaskBackend
        return TaskBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
