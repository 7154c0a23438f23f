"""The errors tinystore raises, all rooted in :class:`Error`::

    Error
    ├── InvalidArgument (also ValueError)   a bad argument: name, id, payload, duration
    ├── LimitExceeded   (also InvalidArgument) a value over its size limit
    ├── Conflict        the attempt no longer holds its lease; nothing it wrote took effect
    ├── Closed          the store was closed
    ├── StoreCorrupt    the file is not a SQLite database, or is damaged
    ├── StoreGone       the store's file was deleted, renamed or replaced while open
    ├── ReadOnly        the store's file, a file beside it, or its folder cannot be written
    └── Unavailable     the store cannot be written now; the same call may work later
        ├── DiskFull    no space is left on the device that holds the store
        ├── DiskError   the disk or its file system reported an I/O error
        └── Locked      another process held the write lock past ``lock_timeout``

Retry, snooze and fail are answers a handler returns, not errors.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every error tinystore raises.

    ``queue`` and ``job_id`` name what the error is about, where it is about a job. An error about a job
    being added without an id says "a new job" (``new_job``), its ``job_id`` None: the id tinystore would
    have made for it is one the caller never saw.
    """

    def __init__(self, message: str, *, queue: str | None = None, job_id: str | None = None,
                 new_job: bool = False):
        where = []
        if queue is not None:
            where.append(f"queue {queue!r}")
        if job_id is not None:
            where.append(f"job {job_id!r}")
        elif new_job:
            where.append("a new job")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.queue = queue
        self.job_id = job_id
        self.message = message  # without the queue and job it names


class InvalidArgument(Error, ValueError):
    """An argument was refused: nothing was written."""


class LimitExceeded(InvalidArgument):
    """A value was over its size limit: nothing was written."""


class Conflict(Error):
    """The attempt no longer holds its lease, so what it tried to write did not take effect."""


class Closed(Error):
    """The store was closed."""


class StoreCorrupt(Error):
    """The file is not a SQLite database, or is damaged. It was left as it was."""


class ReadOnly(Error):
    """The store cannot be written: its file, a file beside it, or its folder is read-only (permissions,
    a read-only mount, ``chattr +i``). Nothing was written."""


class Unavailable(Error):
    """The store cannot be written now, and nothing was written: the same call may work later.

    Workers retry these themselves (see the manual's "Run workers in production").
    """


class DiskFull(Unavailable):
    """No space is left on the device that holds the store. Nothing was written; free some space."""


class DiskError(Unavailable):
    """The disk or its file system reported an I/O error. Nothing was written; check the disk."""


class Locked(Unavailable):
    """Another process held the store's write lock for longer than ``lock_timeout``. Nothing was written."""


class StoreGone(Error):
    """The store's file was deleted, renamed or replaced while it was open: nothing more is written to it.

    Writes from the moment its path stopped naming the file opened raise this;
    open the store again where it is now.
    """
