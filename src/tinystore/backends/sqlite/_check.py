"""Reading every page of a store file, to say whether it is damaged (``tinystore check``).

SQLite keeps no checksums, so damage in the middle of a file shows only when
a statement reads the damaged page, or never: a damaged index can hide jobs
from every worker without an error. ``check`` runs SQLite's ``PRAGMA
integrity_check`` (every page, and every index against its table) or, quick,
``quick_check`` (every page, without comparing the indexes with their
tables), then reads each job's id and payload as a worker would, and counts
the jobs per queue and state against the counts ``stats()`` reads (kept by
triggers: they drift only where rows were changed around them, as a restore
of part of a file or ``.recover`` may). It opens the file read-only and
writes nothing; workers may go on meanwhile.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from typing import Any, Optional

from ..._errors import InvalidArgument
from .._reports import CheckReport, UnreadableJob
from ._damage import is_damage
from ._files import check_existing, connect_read_only, has_tables

# What integrity_check says of an index, or of a page no table or index uses: the tables are whole.
INDEX_ONLY = re.compile(r"row \d+ missing from index \S+|non-unique entry in index \S+|Page \d+ is never used")
COUNTS_OFF = re.compile(r"the jobs per state kept for stats\(\) are off in queue .*")
STATES = ("queued", "running", "done", "failed", "repeating")
# The jobs per queue and state counted from the jobs, as migration 007 first counted them; and counted
# again into the kept counts, in one write transaction.
COUNTED = ("SELECT queue, count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'), "
           "count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'), count(repeat) "
           "FROM tinystore_jobs GROUP BY queue")
RECOUNT = ("BEGIN IMMEDIATE; DELETE FROM tinystore_queue_counts; INSERT INTO tinystore_queue_counts "
           f"(queue, {', '.join(STATES)}) {COUNTED}; COMMIT;")


def check(path: str, quick: bool = False, limit: int = 100) -> CheckReport:
    """What SQLite's check (at most ``limit`` problems) and a read of every job found in the store file at
    ``path``. A path that is not a SQLite file holding tinystore's tables is ``InvalidArgument``."""
    check_existing(path)
    path = os.path.abspath(path)
    pragma = "quick_check" if quick else "integrity_check"
    problems: list[str] = []
    unreadable: list[UnreadableJob] = []
    pages = jobs = None
    try:
        conn: Optional[sqlite3.Connection] = connect_read_only(path)
    except sqlite3.Error as exc:
        conn = None
        _found(exc, problems, path)
    if conn is not None:
        try:
            if not _is_store(conn, problems, path):
                raise InvalidArgument(f"{path} is not a tinystore store: it has no tinystore tables")
            pages = _check(conn, pragma, limit, problems, path)
            jobs = _read_jobs(conn, unreadable, problems, path)
            if jobs is not None:
                _check_counts(conn, problems, path)
        finally:
            conn.close()
    ok = not problems and not unreadable
    return CheckReport(location=path, method=pragma, ok=ok, pages=pages, jobs=jobs, problems=problems,
                       unreadable_jobs=unreadable, advice=None if ok else _advice(path, problems, unreadable))


def _found(exc: sqlite3.Error, problems: list[str], path: str) -> None:
    """A database error met while checking: damage is a problem found; anything else is not a check."""
    code = getattr(exc, "sqlite_errorcode", None)
    if is_damage(exc) or (isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_IOERR):
        problems.append(f"{exc} ({getattr(exc, 'sqlite_errorname', type(exc).__name__)})")
        return
    raise InvalidArgument(f"cannot check {path}: {exc}") from None


def _is_store(conn: sqlite3.Connection, problems: list[str], path: str) -> bool:
    try:
        return has_tables(conn)
    except sqlite3.Error as exc:  # its schema cannot be read: damaged, whatever it held
        _found(exc, problems, path)
        return True


def _check(conn: sqlite3.Connection, pragma: str, limit: int, problems: list[str], path: str) -> Optional[int]:
    try:
        rows = conn.execute(f"PRAGMA {pragma}({int(limit)})").fetchall()
        pages: int = conn.execute("PRAGMA page_count").fetchone()[0]
    except sqlite3.Error as exc:
        _found(exc, problems, path)
        return None
    said = [line for (text,) in rows for line in str(text).splitlines() if not line.startswith("*** ")]
    if said != ["ok"]:
        problems.extend(said)
    return pages


def _read_jobs(conn: sqlite3.Connection, unreadable: list[UnreadableJob], problems: list[str],
               path: str) -> Optional[int]:
    """Read each job's id and payload as a claim does; return how many were read."""
    count = 0
    try:
        rows = conn.execute("SELECT seq, CAST(queue AS BLOB), CAST(id AS BLOB), CAST(payload AS BLOB),"
                            " json_valid(payload) FROM tinystore_jobs ORDER BY seq")
        for seq, queue, id, payload, valid in rows:
            count += 1
            why = _unreadable(id, payload, valid)
            if why is not None:
                unreadable.append(UnreadableJob(seq=seq, queue=_shown(queue), id=_shown(id), why=why))
    except sqlite3.Error as exc:
        _found(exc, problems, path)
        return None
    return count


def _check_counts(conn: sqlite3.Connection, problems: list[str], path: str) -> None:
    """The jobs per queue and state that stats() reads, against a count of the jobs (in the same read)."""
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tinystore_queue_counts'").fetchone() is None:
            return  # a store this version has not opened yet: its migration counts them
        kept = {q: tuple(n) for q, *n in conn.execute(f"SELECT queue, {', '.join(STATES)} FROM tinystore_queue_counts")}
        found = {q: tuple(n) for q, *n in conn.execute(COUNTED)}
    except sqlite3.Error as exc:
        _found(exc, problems, path)
        return
    none = (0,) * len(STATES)
    for queue in sorted(set(kept) | set(found)):
        if kept.get(queue, none) != found.get(queue, none):
            problems.append(f"the jobs per state kept for stats() are off in queue {queue!r}: kept "
                            f"{_per_state(kept.get(queue, none))}; the jobs are {_per_state(found.get(queue, none))}")


def _per_state(counts: tuple[Any, ...]) -> str:
    return ", ".join(f"{state} {n}" for state, n in zip(STATES, counts))


def _unreadable(id: Any, payload: Any, valid: Any) -> Optional[str]:
    """Why a job's id or payload cannot be read, or None."""
    for what, raw in (("id", id), ("payload", payload)):
        if not isinstance(raw, bytes):
            return f"its {what} is not text in the file"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"its {what} is not UTF-8 text ({exc.reason} at byte {exc.start})"
    if not valid:
        try:
            json.loads(text)
        except (ValueError, RecursionError) as exc:
            return f"its payload is not JSON ({exc})"
    return None


def _shown(raw: Any) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else repr(raw)


def _advice(path: str, problems: list[str], unreadable: list[UnreadableJob]) -> str:
    if not problems:
        return (f"the file is whole but {len(unreadable)} job(s) cannot be read: a worker fails each for good "
                "when it claims it, with an error that says so, and the queue goes on; restore the file from "
                "a backup to get them back")
    if all(COUNTS_OFF.fullmatch(p) for p in problems):
        return (f"the jobs are whole; only the counts stats() reads are off (the jobs shown per state, not "
                f"the jobs themselves): count them again, workers may run meanwhile, with: "
                f'sqlite3 {path} "{RECOUNT}", then run tinystore check again')
    if all(INDEX_ONLY.fullmatch(p) for p in problems):
        return (f"the tables are whole; only indexes (or pages no table uses) are damaged, and a damaged "
                f"index can hide waiting jobs from every worker: stop every worker, copy the file, rebuild "
                f"them with: sqlite3 {path} 'REINDEX; VACUUM;', then run tinystore check again")
    return (f"stop every worker and restore {path} from a backup; the sqlite3 shell's .recover "
            f"(sqlite3 {path} .recover) may save what is left of its rows")
