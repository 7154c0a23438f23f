"""A tinystore job as Django's ``TaskResult``: its status, errors, return value and times."""

from __future__ import annotations

import re
import traceback
from datetime import datetime, timezone as tz
from typing import TYPE_CHECKING, Any, Optional

from django.conf import settings
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.utils import timezone
from django.utils.module_loading import import_string

import tinystore

if TYPE_CHECKING:
    from ._backend import TaskBackend

STATUS = {"scheduled": TaskResultStatus.READY, "waiting": TaskResultStatus.READY,
          "running": TaskResultStatus.RUNNING, "done": TaskResultStatus.SUCCESSFUL,
          "failed": TaskResultStatus.FAILED}
TRACEBACK = "Traceback (most recent call last):"
# A failed attempt's times and worker travel with its error, as a note on the exception (PEP 678): the
# store keeps a failed job's error, not what the handler would have returned.
ATTEMPT_NOTE = "tinystore: this attempt ran on {worker} from {began} to {ended}"
ATTEMPT = re.compile(r"^tinystore: this attempt ran on (\S+) from (\S+) to (\S+)\n?", re.M)


def load_task(payload: Any, queue: str, job_id: str, backend: str) -> Task:
    """The task a job runs: the ``Task`` its payload names, imported, as it was enqueued: in the job's
    queue, on ``backend`` (the alias of the backend that found it), with its ``run_after``."""
    path = payload.get("task") if isinstance(payload, dict) else None
    if not isinstance(path, str):
        raise TaskResultDoesNotExist(f"job {job_id!r} of queue {queue!r} is not a Django task")
    try:
        task = import_string(path)
    except ImportError as exc:
        raise tinystore.Error(f"cannot import its task {path}: {exc}", queue=queue, job_id=job_id) from exc
    if not isinstance(task, Task):
        raise tinystore.Error(f"its task {path} is a {type(task).__name__}, not a django.tasks Task "
                              f"(decorate the function with @task)", queue=queue, job_id=job_id)
    return task.using(queue_name=queue, backend=backend, run_after=when(payload.get("run_after")))


def task_result(backend: "TaskBackend", task: Task, job: tinystore.JobState) -> TaskResult:
    """The TaskResult of ``job``: times and the worker where the job knows them.

    A done job's result holds the return value, when its last attempt began
    and ended, and which worker ran it; a failed attempt's error (tinystore
    keeps the last one) holds the same times and worker. ``worker_ids`` has
    an entry per attempt counted, so that ``attempts`` counts them; the ones
    not known are empty.
    """
    if job.state == "done" and isinstance(job.result, dict):
        outcome = job.result
    else:
        outcome = attempt_of(job.error)
    result = make_result(backend, task, job.id, STATUS[job.state], job.payload, job.attempt, outcome.get("worker"),
                         started=outcome.get("started_at"), finished=outcome.get("finished_at"))
    object.__setattr__(result, "errors", errors_of(job.error))
    object.__setattr__(result, "_return_value", outcome.get("return_value"))
    return result


def make_result(backend: "TaskBackend", task: Task, id: str, status: TaskResultStatus, payload: dict[str, Any],
                attempt: int, worker: Optional[str], started: Optional[float] = None,
                finished: Optional[float] = None) -> TaskResult:
    """A TaskResult with no errors or return value (yet)."""
    return TaskResult(
        task=task, id=id, status=status, enqueued_at=when(payload.get("enqueued_at")), started_at=when(started),
        finished_at=when(finished), last_attempted_at=when(started), args=payload["args"],
        kwargs=payload["kwargs"], backend=backend.alias, errors=[],
        worker_ids=[""] * (attempt - 1) + [worker or ""] if attempt else [],
    )


def note_attempt(exc: BaseException, worker: str, began: float, ended: float) -> None:
    """Add the attempt's worker and times to the exception that failed it, where the store keeps them."""
    exc.add_note(ATTEMPT_NOTE.format(worker=worker, began=_iso(began), ended=_iso(ended)))


def attempt_of(error: Optional[str]) -> dict[str, Any]:
    """The worker and times the note of a failed attempt's error gives; empty where it has none (a
    timeout, a lease that ended)."""
    found = ATTEMPT.search(error or "")
    if found is None:
        return {}
    worker, began, ended = found.groups()
    try:
        return {"worker": worker, "started_at": datetime.fromisoformat(began).timestamp(),
                "finished_at": datetime.fromisoformat(ended).timestamp()}
    except ValueError:
        return {}


def errors_of(error: Optional[str]) -> list[TaskError]:
    """The error tinystore keeps as Django's TaskError: the exception's class path and its traceback."""
    if error is None:
        return []
    error = ATTEMPT.sub("", error)
    start = error.find("\n" + TRACEBACK)
    trace = error[start + 1:] if start >= 0 else error
    return [TaskError(exception_class_path=class_path(error, trace), traceback=trace)]


def describe(exc: BaseException) -> TaskError:
    """An exception as Django's TaskError."""
    return TaskError(exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
                     traceback="".join(traceback.format_exception(exc)))


def class_path(error: str, trace: str) -> str:
    """The exception's class path, read from its traceback's last line (``mod.Name: message``, or
    ``Name: message`` for a built-in). tinystore's own errors (a timeout, a lease that ended, a reason
    given to ``run.fail``) name no class: a timeout reads as TimeoutError, the others as tinystore.Error."""
    name = error.partition(":")[0].strip()
    if name.isidentifier() and trace.startswith(TRACEBACK):
        found = re.findall(rf"^((?:[A-Za-z_]\w*\.)*{re.escape(name)})(?::|$)", trace, re.M)
        if found:
            return found[-1] if "." in found[-1] else f"builtins.{found[-1]}"
    return "builtins.TimeoutError" if name == "timeout" else "tinystore.Error"


def when(timestamp: Any) -> Optional[datetime]:
    """A UNIX time as Django has datetimes: aware UTC, or naive in TIME_ZONE where USE_TZ is False."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
        return None
    moment = datetime.fromtimestamp(timestamp, tz.utc)
    return moment if settings.USE_TZ else timezone.make_naive(moment)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz.utc).isoformat()
