"""Batches: jobs of any queues gathered under one id, and the ``then`` job added once they have all ended.

``store.batch(then=(queue, payload))`` makes one (``Batch``); ``batch=`` on
``add`` and ``add_many`` adds jobs to it, in any number of calls and
processes, inside a transaction too; ``Batch.close()`` says that no more
will join. The backend adds the then job in the transaction that ends the
batch's last job (or that closes it, where every job has ended already),
exactly once; its payload gets ``"batch": {"id", "done", "failed",
"cancelled"}`` beside its own keys. ``store.batch_state(id)`` reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from ._awaiting import Steps, awaited, resolved
from ._context import Context
from ._errors import InvalidArgument
from ._jobstate import Job
from ._values import MAX_JSON, check_priority, check_text_id, encode_json
from .backends._base import BatchRow, NewJob

ROOM = 512  # bytes of a then job's payload left for its "batch" key


class Batch:
    """A batch of jobs, from ``store.batch(then=...)``: ``batch=`` on ``add``/``add_many`` adds jobs to
    it, ``close()`` says that no more will join. ``id`` names it in every process (``batch=`` takes the
    id too, and ``store.batch_state(id)`` reads it); its then job, once added, has the same id."""

    def __init__(self, ctx: Context, id: str):
        self._ctx = ctx
        self.id = id

    def __repr__(self) -> str:
        return f"<Batch {self.id!r}>"

    def close(self) -> None:
        """No more jobs join the batch; once every job of it has ended, its then job is added (at once,
        in the close's own transaction, where they have all ended already or it has none). Closing it
        again changes nothing; a batch the store no longer keeps (it left with its then job) is
        ``InvalidArgument``."""
        resolved(self._close())

    async def close_async(self) -> None:
        """``close`` for ``await``."""
        await awaited(self._close())

    def _close(self) -> "Steps[None]":
        self._ctx.check_open()
        if self._ctx.backend.in_transaction():
            raise InvalidArgument(f"a store.transaction() is open in this thread: close batch {self.id!r} "
                                  "after it commits")
        if not (yield self._ctx.backend.close_batch(self.id, self._ctx.clock.now())):
            raise InvalidArgument(f"batch {self.id!r} is not kept by the store (or left with its then job)")


@dataclass(frozen=True)
class BatchState:
    """What ``store.batch_state(id)`` reads of a batch (``id``): how many of its jobs are ``scheduled``,
    ``waiting``, ``running``, ``done``, ``failed`` (for good) and ``cancelled`` (``total`` joined it),
    whether it is ``closed``, and its then job's queue (``then_queue``) and, once added, id
    (``then_id``)."""

    id: str
    closed: bool
    total: int
    scheduled: int
    waiting: int
    running: int
    done: int
    failed: int
    cancelled: int
    then_queue: str
    then_id: Optional[str]


def then_job(queue: str, then: Any) -> NewJob:
    """The then job as given (a JSON object, or a ``Job`` of one with ``priority=`` or ``group=``), checked
    before anything is written; its id and time are the batch's when it is added."""
    job = then if isinstance(then, Job) else Job(then)
    given = [name for name in ("id", "at", "delay", "repeat") if getattr(job, name) is not None]
    if given:
        raise InvalidArgument(f"a batch's then job takes no {', '.join(given)}=: its id is the batch's, and it "
                              "is added once every job of the batch has ended", queue=queue)
    payload = encode_json(job.payload, "the then job's payload", queue, limit=MAX_JSON - ROOM)
    if not payload.startswith("{"):
        raise InvalidArgument(f"the then job's payload must be a JSON object, as its \"batch\" key is added "
                              f"beside its own, not {type(job.payload).__name__} {job.payload!r}", queue=queue)
    if "batch" in json.loads(payload):
        raise InvalidArgument("the then job's payload has a \"batch\" key, which is the batch's to give",
                              queue=queue)
    group = check_text_id(job.group, "group", queue) if job.group is not None else None
    return NewJob("", payload, group, 0.0, priority=check_priority(job.priority, queue))


def state_of(row: Optional[BatchRow], now: float) -> Optional[BatchState]:
    """A stored batch as read, or None where it is not kept: its then job is past its time (JOB-11)."""
    if row is None or (row.then_expires is not None and row.then_expires <= now):
        return None
    return BatchState(row.id, row.closed_at is not None, row.total, row.scheduled, row.waiting, row.running,
                      row.done, row.failed, row.cancelled, row.then_queue, row.then_id)
