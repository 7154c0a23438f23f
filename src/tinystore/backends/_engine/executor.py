"""What the engine needs of a backend's connection: named statements run, and the few things drivers do apart.

A backend's executor wraps one connection in one transaction (its writer's,
or a read's). The engine names statements; the executor finds each one's
text in the backend's catalogue (the shared ``queries.sql`` and the
backend's dialect file, see ``statements``) and runs it. Beyond that, it
says only what a driver does its own way:

- ``array``: a list of values as one parameter (SQLite: a JSON array read
  with ``json_each``; PostgreSQL: an array);
- ``columns``: lists read as rows (SQLite: one JSON array of rows, ``:rows``;
  PostgreSQL: an array per list, read with ``unnest``);
- ``update_groups``: groups whose running count changed, read again (SQLite:
  one statement over a JSON array; PostgreSQL: one per group, see its dialect);
- ``taken``: a claimed row as a ``Claimed`` (SQLite reads the bytes in the
  file, and may find them damaged: ``Unreadable``);
- ``insert_jobs``, ``insert_job`` and ``jobs_left``: how seqs are handed out
  (SQLite: by the writer, above a floor; PostgreSQL: an identity column);
- ``kept_options``: a queue's options as kept (PostgreSQL reads them once per
  transaction, as it holds the queue's lock);
- ``hold_lease`` and ``own_lease``: an attempt's lease held until the
  transaction ends, for writes that must not land after it ended;
- ``lock_groups``: groups' rows changed one transaction at a time, where
  writers of a queue run side by side (SQLite's single writer already
  orders them);
- ``ahead``: a read sent now and answered later, so that a driver whose
  reads cross a network sends the reads of a step together (PostgreSQL's
  pipeline: one round trip for all of them; SQLite runs each at once);
- ``takes_at_once``: whether the driver picks, takes and leases the due
  jobs without a group of a queue without limits in one statement
  (``take_due``: PostgreSQL, where each statement is a round trip; SQLite
  has no statement that writes two tables, and its reads cost none).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional, Sequence

from .._base import Claimed, NewJob


class Unreadable(Exception):
    """A claimed job whose id or payload cannot be read as stored: ``error`` says why, for the job's row."""

    def __init__(self, seq: int, id: str, attempt: int, error: str):
        super().__init__(error)
        self.seq, self.id, self.attempt, self.error = seq, id, attempt, error


class Later:
    """The answer of a statement sent ahead (``Executor.ahead``), read when it is needed."""

    def __init__(self, rows: list[tuple[Any, ...]]):
        self._rows = rows

    def one(self) -> Optional[tuple[Any, ...]]:
        rows = self.all()
        return rows[0] if rows else None

    def row(self) -> tuple[Any, ...]:
        """The one row the statement always answers (an aggregate)."""
        return _found(self.one(), "a statement sent ahead")

    def all(self) -> list[tuple[Any, ...]]:
        return self._rows


class Executor(ABC):
    """One connection, in one transaction, running the engine's named statements."""

    takes_at_once = False

    @abstractmethod
    def one(self, name: str, params: Any = ()) -> Optional[tuple[Any, ...]]:
        """The first row of statement ``name``, or None."""

    @abstractmethod
    def all(self, name: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Every row of statement ``name``."""

    def row(self, name: str, params: Any = ()) -> tuple[Any, ...]:
        """The one row statement ``name`` always answers (an aggregate, a row it wrote and returns)."""
        return _found(self.one(name, params), name)

    def ahead(self, name: str, params: Any = ()) -> Later:
        """Send statement ``name`` now; its rows are read later. It runs where it is sent, after what was sent
        before it and before what follows, as ``one`` and ``all`` do."""
        return Later(self.all(name, params))

    @abstractmethod
    def run(self, name: str, params: Any = ()) -> None:
        """Run statement ``name``, whose answer nothing reads: a driver may send it with the statements that
        follow, in one round trip (its error then comes with their answers, failing the transaction)."""

    @abstractmethod
    def each(self, name: str, rows: list[Any]) -> None:
        """Run statement ``name`` once per row of parameters (answers not read, as ``run``)."""

    @abstractmethod
    def array(self, values: Sequence[Any]) -> Any:
        """``values`` as one parameter of a statement that reads a list."""

    @abstractmethod
    def columns(self, **columns: list[Any]) -> dict[str, Any]:
        """Lists of the same length as the parameters of a statement that reads them as rows."""

    @abstractmethod
    def update_groups(self, queue: str, changes: dict[str, int], limit: int) -> None:
        """Groups whose running count changes by ``changes[grp]``: each one's head and room read again
        (``limit``: the most jobs a group may run)."""

    @abstractmethod
    def taken(self, row: tuple[Any, ...]) -> Claimed:
        """A row of statement ``take`` as the job claimed; ``Unreadable`` where it cannot be read."""

    def not_taken(self, queue: str, picked: list[tuple[Any, ...]]) -> None:
        """Picked jobs (``(priority, at, seq, grp)``, read from a due index) that ``take`` did not find
        queued. A driver whose claims can meet rows that another claim took since they were picked lets
        them be."""

    @abstractmethod
    def insert_jobs(self, queue: str, jobs: list[NewJob]) -> list[tuple[Optional[int], bool]]:
        """Insert jobs in order, skipping each whose id is taken: per job its seq (None where the driver
        hands one out only to a job it writes) and whether it was written."""

    @abstractmethod
    def insert_job(self, queue: str, job: NewJob, seq: Optional[int]) -> int:
        """Insert one job whose id is free again, under ``seq`` where ``insert_jobs`` gave one; its seq."""

    def jobs_left(self, seqs: list[int]) -> None:
        """Jobs with these seqs left the store (a driver that must keep their seqs from coming back)."""

    def lock_groups(self, queue: str, grps: Sequence[str]) -> None:
        """Before a group's row is read or written: no other transaction changes it until this one ends."""

    def kept_options(self, queue: str) -> Optional[str]:
        """The options a queue keeps (JSON text), or None."""
        row = self.one("queue_options", (queue,))
        return row[0] if row else None

    def options_ahead(self, queue: str) -> None:
        """A queue's options are about to be read (``kept_options``): a driver may send the read now."""

    def forget_options(self, queue: str) -> None:
        """A queue's options were just saved: a later ``kept_options`` reads them again."""

    def hold_lease(self, seq: int, attempt: int) -> bool:
        """Whether the attempt holds its lease, which nothing may end before this transaction does (for a
        progress or a step it writes)."""
        return self.one("lease_held_for_write", (seq, attempt)) is not None

    def own_lease(self, seq: int, attempt: int) -> bool:
        """``hold_lease`` for run.transaction, whose application code may run long: no write of the
        lease's queue may change it meanwhile."""
        return self.hold_lease(seq, attempt)


def _found(row: Optional[tuple[Any, ...]], name: str) -> tuple[Any, ...]:
    if row is None:
        raise LookupError(f"statement {name!r} answered no row, where it always answers one")
    return row
