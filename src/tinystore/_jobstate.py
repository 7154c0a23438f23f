"""A job as users read it (``JobState``), and one item given to ``add_many`` (``Job``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Literal, Optional, Union, cast, get_args

from ._durations import Duration
from ._repeat import Repeat
from ._settle import rule_of
from ._values import from_timestamp

JobStateName = Literal["scheduled", "waiting", "running", "done", "failed", "cancelled"]
"""The state of a job, as ``JobState.state`` says it (a watcher alone sees ``cancelled``)."""

STATES: tuple[JobStateName, ...] = get_args(JobStateName)


@dataclass(frozen=True)
class JobState:
    """What you read of a job: what ``add``, ``get``, ``jobs`` and ``watch`` return, as it was when read.

    (What you give ``add_many`` to add a job is a ``tinystore.Job``.)

    ``id`` names the job in its ``queue``; ``payload`` is the JSON it was added
    with, and ``group`` its group (None for none).
    ``state`` is one of scheduled, waiting, running, done, failed (and
    cancelled, which only a watcher sees). ``at`` is when the job is or was
    due, ``attempt`` counts the attempts so far and ``attempts`` is the limit;
    ``error`` is the last attempt's error; ``progress`` what the running
    handler reported; ``result`` what the handler returned (JSON) once it is
    done; ``repeat`` the rule of a repeating job (``tinystore.cron`` or
    ``tinystore.every``; None for a job that runs once, and where its rule
    cannot be read); ``priority`` its priority (-100 to 100, the highest
    starts first); ``added`` whether ``add`` wrote this job.

    ``ahead`` counts the due jobs of the queue that start before a waiting
    one (0 for any other state). It costs a query of the store (a count over
    the due jobs), so it is counted when first read, then kept; first read
    after its store was closed, it raises ``tinystore.Closed``. A watcher's
    states come with it counted.
    """

    id: str
    queue: str
    state: JobStateName
    payload: Any
    group: Optional[str]
    at: datetime
    attempt: int
    attempts: int
    error: Optional[str] = None
    progress: Any = None
    result: Any = None
    repeat: Optional[Repeat] = None
    priority: int = 0
    added: bool = False
    _ahead: Union[int, Callable[[], int], None] = field(default=0, repr=False, compare=False)

    @property
    def ahead(self) -> int:
        """The due jobs that start before this one; counted by the store when first read (see above)."""
        ahead = self._ahead
        if callable(ahead):
            ahead = ahead()
            object.__setattr__(self, "_ahead", ahead)
        return ahead or 0

    def __repr__(self) -> str:
        return (f"JobState(id={self.id!r}, queue={self.queue!r}, state={self.state!r}, attempt={self.attempt}"
                f"/{self.attempts}, at={self.at.isoformat()}, group={self.group!r}, error={self.error!r})")

    def watched(self) -> tuple[Any, ...]:
        """What a watcher is told about when it changes (JOB-13)."""
        return (self.state, self.attempt, self.ahead, self.progress, self.error)


def visible(row: Any, now: float) -> Any:
    """``row``, or None where it is gone: a done or failed job past dedupe or keep is gone, whether or not
    maintenance removed it yet (JOB-11)."""
    if row is None or (row.expires is not None and row.expires <= now):
        return None
    return row


def moved(last: JobState, /, **changes: Any) -> JobState:
    """``last`` as a later change left it (a watcher's step between two reads): ``ahead`` is not counted
    for it (0)."""
    return replace(last, _ahead=0, **changes)


def state_of(row: Any, now: float, attempts: int, ahead: Union[int, Callable[[], int]] = 0,
             added: bool = False) -> JobState:
    """A JobState from a backend row; the state of a queued job is read from the time.

    A row is read defensively, so that one damaged row never stops a read of
    the whole queue: its text may come as bytes (read raw from the file), a
    payload that is not UTF-8 JSON reads as None with an error that says so,
    and a time outside years 1 to 9999 as the nearest end of that range.
    """
    # A backend keeps a queued job (its state read from the time) or one of JobStateName's.
    state = ("scheduled" if row.at > now else "waiting") if row.state == "queued" else cast(JobStateName, row.state)
    payload, unreadable = _json(row.payload)
    progress, _ = _json(row.progress)
    result, _ = _json(row.result)
    error = _text(row.error)
    if unreadable is not None and error is None:
        error = f"its payload could not be read: {unreadable}"
    return JobState(
        id=row.id, queue=row.queue, state=state, payload=payload, group=row.grp,
        at=from_timestamp(row.at), attempt=row.attempt, attempts=attempts, error=error,
        progress=progress, result=result, repeat=rule_of(row.repeat), priority=row.priority, added=added,
        _ahead=ahead if state == "waiting" else 0,
    )


def _json(raw: Union[str, bytes, None]) -> tuple[Any, Optional[str]]:
    """A stored JSON value (text, or the bytes in the file) and None, or None and why it could not be read."""
    if raw is None:
        return None, None
    try:
        return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw), None
    except UnicodeDecodeError as exc:
        return None, f"its bytes in the file are not UTF-8 text ({exc.reason} at byte {exc.start})"
    except (ValueError, TypeError, RecursionError) as exc:
        return None, f"it is not JSON ({exc})"


def _text(raw: Union[str, bytes, None]) -> Optional[str]:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


@dataclass(frozen=True)
class Job:
    """What you give ``queue.add_many`` to add a job: a ``payload`` with the options of ``add`` (``id``,
    ``at``, ``delay``, ``group``, ``repeat``, ``priority``).

    It is only the input: what ``add_many`` returns, and what you read of a job
    afterwards, is a ``tinystore.JobState``.
    """

    payload: Any
    id: Optional[str] = None
    at: Optional[Union[datetime, float]] = None
    delay: Optional[Duration] = None
    group: Optional[str] = None
    repeat: Optional[Repeat] = None
    priority: int = 0
