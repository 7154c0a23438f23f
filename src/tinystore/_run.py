"""What a handler gets: ``Run`` (a ``def`` handler) and ``AsyncRun`` (an ``async def`` one).

Both describe the attempt, keep steps under the job (JOB-06), run steps that
write the application's rows exactly once (JOB-14), report progress, and make
the answers ``retry``, ``snooze`` and ``fail``. Every write names the lease
``(job, attempt)``: from an attempt that lost it, nothing takes effect.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from concurrent.futures import Future
from datetime import datetime
from typing import Any, Callable, Optional, TypeVar

from ._answers import Fail, Retry, Snooze
from ._attempt import Attempt
from ._durations import Duration, parse_duration
from ._errors import Conflict, InvalidArgument
from ._events import fields
from ._values import MAX_PROGRESS, check_text_id, encode_json, from_timestamp

log = logging.getLogger("tinystore.worker")

T = TypeVar("T")


async def written(future: Future[T]) -> T:
    """The result of a write handed to the store's writer, on the event loop.

    The writer runs an operation on the caller's thread when its lock is
    free: then the result is there at once, and is read after one yield to
    the loop (other handlers, timeouts and renewals run meanwhile) rather
    than through a wake-up from another thread.
    """
    if future.done():
        await asyncio.sleep(0)
        return future.result()
    return await asyncio.wrap_future(future)


ATTRIBUTES = """

    It describes the attempt:

    - ``id``: the job's id; ``queue``: its queue's name; ``group``: its group, or None.
    - ``attempt``: this attempt's number, from 1 (a snoozed job's next run has the same number).
    - ``at``: when the job was due for this run, an aware UTC ``datetime``.
    - ``cancelled``: turns true when the handler should stop: the job was cancelled (JOB-12), or
      this attempt ran past the queue's timeout (JOB-09). An async handler is cancelled as well; a
      ``def`` handler, which cannot be stopped from outside, should check it between pieces of work.
      After a cancel nothing it writes through tinystore takes effect; after a timeout its attempt
      has failed whatever it returns, and a step it finishes meanwhile is still kept.
    """


class _RunBase:
    """What both kinds of run share: the attempt, its answers, its steps' bookkeeping."""

    queue: str
    id: str
    attempt: int
    group: Optional[str]
    at: datetime

    def __init__(self, backend: Any, queue: str, record: Attempt):
        claimed = record.claimed
        self._backend = backend
        self._record = record  # the worker's record of this attempt: whether the handler should stop
        self._seq = claimed.seq
        self._names: set[str] = set()
        self.queue = queue
        self.id = claimed.id
        self.attempt = claimed.attempt
        self.group = claimed.grp
        self.at = from_timestamp(claimed.at)

    @property
    def cancelled(self) -> bool:
        """True once this attempt should stop: its timeout passed, its job was cancelled, or its lease could
        not be renewed. A ``def`` handler, which cannot be stopped from outside, looks at it (JOB-09)."""
        return self._record.cancelled

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.queue}/{self.id} attempt {self.attempt}>"

    @property
    def lease(self) -> tuple[int, int]:
        """The lease this attempt holds, as the job's row number and the attempt: what every settlement and
        step of the attempt names, so that one from a lease lost changes nothing (JOB-05)."""
        return (self._seq, self.attempt)

    def retry(self, delay: Duration) -> Retry:
        """Answer: run again after ``delay``; this attempt counts (JOB-08)."""
        return Retry(parse_duration(delay, "retry delay"))

    def snooze(self, delay: Duration) -> Snooze:
        """Answer: run again after ``delay``; this attempt does not count (JOB-08)."""
        return Snooze(parse_duration(delay, "snooze delay"))

    def fail(self, reason: str) -> Fail:
        """Answer: fail for good now, with ``reason`` as the error (JOB-08)."""
        return Fail(str(reason))

    def progress(self, value: Any) -> None:
        """Report JSON (at most 4 KiB) that ``get`` and ``watch`` show while the job runs."""
        text = encode_json(value, "progress", self.queue, self.id, limit=MAX_PROGRESS)
        self._backend.progress(self._seq, self.attempt, text).add_done_callback(self._progress_done)

    def _progress_done(self, future: Any) -> None:
        if future.exception() is not None:
            log.warning("progress of %s/%s attempt %d was not kept: %s", self.queue, self.id,
                        self.attempt, future.exception(),
                        extra=fields(self.queue, self.id, self.attempt))

    def _claim_name(self, name: str) -> None:
        check_text_id(name, "step name", self.queue, self.id)
        if name in self._names:
            raise InvalidArgument(
                f"step {name!r} was already called in this run; give repeated steps numbered names "
                f"such as '{name}:1', '{name}:2'", queue=self.queue, job_id=self.id)
        self._names.add(name)

    def _kept(self, name: str) -> tuple[bool, Any]:
        text = self._backend.step_answer(self._seq, name)
        return (False, None) if text is None else (True, json.loads(text))

    def _encode(self, name: str, answer: Any) -> str:
        return encode_json(answer, f"the answer of step {name!r}", self.queue, self.id)

    def _lost(self, what: str) -> Conflict:
        return Conflict(f"{what} was not kept: attempt {self.attempt} no longer holds its lease",
                        queue=self.queue, job_id=self.id)

    def _transaction(self, name: str, fn: Callable[[Any], Any]) -> Any:
        """fn's writes and the step's answer in one commit, exactly once (JOB-14): one backend operation."""
        self._claim_name(name)
        try:
            _, text = self._backend.transact(self.lease, name, fn, lambda answer: self._encode(name, answer))
        except Conflict:
            raise self._lost(f"transaction {name!r}") from None
        return json.loads(text)


class Run(_RunBase):
    __doc__ = """The run of a plain ``def`` handler, in a worker thread.""" + ATTRIBUTES

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Return fn's answer, kept under the job: a later attempt gets it back without calling fn."""
        self._claim_name(name)
        found, answer = self._kept(name)
        if found:
            return answer
        text = self._encode(name, fn())
        if not self._backend.keep_step(self._seq, self.attempt, name, text).result():
            raise self._lost(f"step {name!r}")
        return json.loads(text)

    def transaction(self, name: str, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(tx)`` and keep its answer in one transaction: exactly once (JOB-14)."""
        return self._transaction(name, fn)


class AsyncRun(_RunBase):
    __doc__ = """The run of an ``async def`` handler, on the worker's event loop.""" + ATTRIBUTES

    async def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Return fn's answer (fn sync or async), kept under the job: a later attempt gets it back."""
        self._claim_name(name)
        # Read in a thread: the loop runs other handlers meanwhile, whatever the database's latency.
        found, answer = await asyncio.get_running_loop().run_in_executor(None, self._kept, name)
        if found:
            return answer
        answer = fn()
        if inspect.isawaitable(answer):
            answer = await answer
        text = self._encode(name, answer)
        if not await written(self._backend.keep_step(self._seq, self.attempt, name, text)):
            raise self._lost(f"step {name!r}")
        return json.loads(text)

    async def transaction(self, name: str, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(tx)`` in a thread and keep its answer in one transaction: exactly once (JOB-14)."""
        return await asyncio.get_running_loop().run_in_executor(None, self._transaction, name, fn)
