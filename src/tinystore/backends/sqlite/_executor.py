"""The engine's executor on a SQLite connection (``_engine.executor``).

Lists are passed as JSON text read with ``json_each``, so each statement is
prepared once whatever the size of the batch. Seqs are handed out here: the
writer holds the file's write lock, so the next ones are read, above every
job kept and above the floor that jobs leaving raise (an application's
transaction, which may not hold the lock yet, reserves them with a write).
A claimed row comes as the bytes in the file, and may have been damaged
under its job: it is then ``Unreadable``, and fails that job alone. A job a
due index lists as waiting that the table does not hold so is damage too, of
another kind: the claim raises ``StoreCorrupt`` (``not_taken``).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Optional, Sequence

from .._base import Claimed, NewJob
from .._engine.executor import Executor, Unreadable
from ._damage import damaged
from ._sql import Q


class SQLiteExecutor(Executor):
    """``conn`` in a transaction; ``locked``: it holds the write lock already (the writer's own)."""

    def __init__(self, conn: sqlite3.Connection, locked: bool = True):
        self.conn = conn
        self.locked = locked

    def one(self, name: str, params: Any = ()) -> Optional[tuple[Any, ...]]:
        row: Optional[tuple[Any, ...]] = self.conn.execute(Q[name], params).fetchone()
        return row

    def all(self, name: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(Q[name], params).fetchall()

    def run(self, name: str, params: Any = ()) -> None:
        self.conn.execute(Q[name], params)

    def each(self, name: str, rows: list[Any]) -> None:
        self.conn.executemany(Q[name], rows)

    def array(self, values: Sequence[Any]) -> str:
        return json.dumps(list(values))

    def columns(self, **columns: list[Any]) -> dict[str, Any]:
        return {"rows": json.dumps(list(zip(*columns.values())))}

    def update_groups(self, queue: str, changes: dict[str, int], limit: int) -> None:
        self.conn.execute(Q["groups_update"], {"queue": queue, "changes": json.dumps(list(changes.items())),
                                               "limit": limit})

    def taken(self, row: tuple[Any, ...]) -> Claimed:
        seq, raw_id, raw_payload, grp, at, attempt, valid, repeat = row
        try:
            id, payload = raw_id.decode("utf-8"), raw_payload.decode("utf-8")
            if not valid:
                json.loads(payload)  # SQLite's parser is a quick first look; Python's, the worker's, decides
        except (ValueError, RecursionError, AttributeError) as exc:  # UnicodeDecodeError is a ValueError
            raise Unreadable(seq, _shown(raw_id), attempt, self._unreadable(raw_id, exc)) from None
        return Claimed(seq, id, payload, grp, at, attempt, repeat)

    def not_taken(self, queue: str, picked: list[tuple[Any, ...]]) -> None:
        """A picked job the take did not find queued: ``StoreCorrupt``.

        The writer holds the write lock from the pick to the take, so a job read from a due index
        (``tinystore_jobs_due_priority``, ``tinystore_jobs_group_priority``) is queued in the table unless the
        file is damaged: the index lists a row the table no longer yields, and every claim would pick
        it again, for ever.
        """
        path = self.conn.execute("PRAGMA database_list").fetchone()[2]
        seqs = ", ".join(str(pick[2]) for pick in picked)
        raise damaged(path, f"the due jobs' index of queue {queue!r} lists jobs as waiting that its jobs "
                            f"table does not hold as waiting (seq {seqs})", queue)

    def _unreadable(self, raw_id: object, exc: BaseException) -> str:
        what = "id" if not isinstance(raw_id, bytes) or not _decodes(raw_id) else "payload"
        if isinstance(exc, UnicodeDecodeError):
            why = f"its bytes in the file are not UTF-8 text ({exc.reason} at byte {exc.start})"
        elif isinstance(exc, AttributeError):
            why = "it is not text in the file"
        else:
            why = f"it is not JSON ({exc})"
        path = self.conn.execute("PRAGMA database_list").fetchone()[2]
        return f"its {what} could not be read: {why}; the store file may be damaged: run `tinystore check {path}`"

    def insert_jobs(self, queue: str, jobs: list[NewJob]) -> list[tuple[Optional[int], bool]]:
        if self.locked:
            first = self.conn.execute(Q["seq_next"]).fetchone()[0]
        else:
            first = self.conn.execute(Q["seqs_reserve"], (len(jobs),)).fetchone()[0] - len(jobs) + 1
        seqs = list(range(first, first + len(jobs)))
        # One statement for the batch: a row whose id is taken is skipped, and looked for below.
        inserted = self.conn.executemany(Q["job_insert"], [_row(seq, queue, job) for seq, job in zip(seqs, jobs)]).rowcount
        if inserted == len(jobs):
            return [(seq, True) for seq in seqs]
        present = {r[0] for r in self.conn.execute(Q["jobs_by_seqs"], (json.dumps(seqs),))}
        return [(seq, seq in present) for seq in seqs]

    def insert_job(self, queue: str, job: NewJob, seq: Optional[int]) -> int:
        self.conn.execute(Q["job_insert"], _row(seq, queue, job))
        return seq  # type: ignore[return-value]  # insert_jobs gives every job a seq

    def jobs_left(self, seqs: list[int]) -> None:
        self.conn.execute(Q["sequence_floor"], {"seq": max(seqs)})


def _row(seq: Optional[int], queue: str, job: NewJob) -> tuple[Any, ...]:
    return (seq, queue, job.id, job.payload, job.grp, job.at, job.repeat, job.priority, job.batch)


def _shown(raw_id: object) -> str:
    return raw_id.decode("utf-8", "replace") if isinstance(raw_id, bytes) else repr(raw_id)


def _decodes(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
