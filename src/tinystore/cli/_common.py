"""What the commands share: opening a store for operations, output for people or scripts, progress.

An operations command never creates a store and never turns a file, a
database or a schema into one: ``tinystore.backends.open_existing`` refuses,
before anything writes to it, what is not a store already. STORE is a SQLite
file or a ``postgresql://`` URL (tables in schema ``tinystore`` unless
``--schema``). The commands that only read open a SQLite file read-only, so
they work on a store this process may not write, and write nothing to it; a
PostgreSQL store is opened as ``tinystore.open`` opens it (the database
enforces what its user may do), its one write the process's registration,
which close removes. A URL is never shown with its password
(``backends.shown``).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any, Iterable, Optional, Sequence

import tinystore
from tinystore import JobState, Queue, Store, backends


class CommandError(Exception):
    """Bad input: the command prints this one line and exits with ``code``, having changed nothing."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def add_store_argument(parser: Any, schema: bool = True) -> None:
    """STORE, and ``--schema`` for a command that opens it."""
    parser.add_argument("store", metavar="STORE", help="the store: a SQLite file or a postgresql:// URL")
    if schema:
        parser.add_argument("--schema", metavar="NAME",
                            help="for a postgresql:// URL: the schema of tinystore's tables (default tinystore)")


def add_json_argument(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")


def add_job_arguments(parser: Any) -> None:
    """STORE QUEUE ID [--schema NAME] [--json]: the arguments of a command about one job."""
    add_store_argument(parser)
    parser.add_argument("queue", metavar="QUEUE")
    parser.add_argument("id", metavar="ID")
    add_json_argument(parser)


# Opening

def open_store(args: Any, read_only: bool = False) -> Store:
    """Open the existing store of ``args.store`` (``args.schema``) for an operation; refuse anything else
    before writing a byte.

    ``read_only``: for a command that only reads; nothing is written to a SQLite store.
    """
    target, schema = args.store, getattr(args, "schema", None)
    if schema is not None and not backends.is_url(target):
        raise CommandError(f"--schema is for a postgresql:// URL, and {target} is a SQLite file "
                           f"(one store, no schemas)")
    return Store(backends.open_existing(target, read_only=read_only, schema=schema), tinystore.Clock())


def open_queue(store: Store, name: str) -> Queue:
    """A queue the store already keeps: never create one by naming it."""
    names = store.queues()
    if name not in names:
        known = ", ".join(names) if names else "none"
        raise CommandError(f"no queue named {name!r} in {store.location} (its queues: {known})")
    return store.queue(name)


def get_job(queue: Queue, id: str) -> JobState:
    job = queue.get(id)
    if job is None:
        raise CommandError(f"no job {id!r} in queue {queue.name!r}")
    return job


# Output

def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def job_json(job: JobState, ahead: bool = False) -> dict[str, Any]:
    """A job as JSON; ``ahead`` costs a count, so only ``show`` asks for it."""
    data: dict[str, Any] = {
        "id": job.id, "queue": job.queue, "state": job.state, "payload": job.payload, "group": job.group,
        "priority": job.priority, "at": iso(job.at), "attempt": job.attempt, "attempts": job.attempts, "error": job.error,
        "progress": job.progress, "result": job.result,
        "repeat": None if job.repeat is None else {"rule": str(job.repeat), **json.loads(job.repeat.stored())},
    }
    if ahead:
        data["ahead"] = job.ahead
    return data


def iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def age(seconds: Optional[float]) -> str:
    """A duration for people: 4.2s, 3m10s, 2h5m, 3d4h."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def first_line(text: Optional[str]) -> str:
    return "" if not text else text.splitlines()[0]


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell; the columns in ``right`` aligned right (numbers)."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


class Progress:
    """Progress of a long operation on stderr, shown only when stdout and stderr are both terminals."""

    def __init__(self) -> None:
        self.shown = sys.stdout.isatty() and sys.stderr.isatty()
        self._width = 0

    def update(self, text: str) -> None:
        if self.shown:
            sys.stderr.write("\r" + text.ljust(self._width))
            sys.stderr.flush()
            self._width = len(text)

    def done(self) -> None:
        if self.shown and self._width:
            sys.stderr.write("\n")
            sys.stderr.flush()
