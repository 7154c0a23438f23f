"""Maintenance looks for damage in tinystore's tables once a day, so that a store learns of it unasked.

SQLite keeps no checksums, and a claim reads the due indexes, not the jobs
table: bits flipped in an index can hide waiting jobs from every worker
with no error anywhere. So maintenance runs ``PRAGMA integrity_check`` on
each of tinystore's tables with its indexes (every page, and every index
against its table), at most once a day for the store: the process that
takes the day's check writes its time in ``tinystore_checked`` first, so
that of every process maintaining the store only one checks. The check
reads through a connection of its own in one read transaction: claims,
settlements and adds go on meanwhile. The application's tables in the same
file are not read (``tinystore check`` reads the whole file). What it finds
is logged as an error naming the file and saying to run ``tinystore check``;
the worker goes on. On a 1 GB store it costs about 6 s of CPU when the file
is in the page cache, 14 s when it is read from the disk (docs/reliability.md).
"""

from __future__ import annotations

import logging
import sqlite3
import time

from ._damage import is_damage
from ._sql import Q

log = logging.getLogger("tinystore.store")

EVERY = 86400.0  # seconds of the store's clock between two checks
SHOWN = 10  # problems named in the log line


def take(conn: sqlite3.Connection, now: float) -> bool:
    """In a write transaction: whether this process checks now (the last check was a day ago); if so, it
    has taken the day's check."""
    return conn.execute(Q.check_take, {"now": now, "every": EVERY}).fetchone() is not None


def run(conn: sqlite3.Connection, path: str) -> list[str]:
    """Check tinystore's tables and their indexes in the store at ``path`` through ``conn``, inside a
    read transaction; log what was found, and return it (empty when whole)."""
    began = time.monotonic()
    problems: list[str] = []
    try:
        for (table,) in conn.execute(Q.tables_of_tinystore).fetchall():
            rows = conn.execute(f"PRAGMA integrity_check({table})").fetchall()
            problems += [line for (text,) in rows for line in str(text).splitlines()
                         if line != "ok" and not line.startswith("*** ")]
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        problems.append(f"{exc} ({exc.sqlite_errorname})")
    took = time.monotonic() - began
    if problems:
        log.error("the store %s is damaged: the daily check of tinystore's tables found %d problem(s): %s; "
                  "run `tinystore check %s` to see what is damaged and what to do", path, len(problems),
                  "; ".join(problems[:SHOWN]) + ("; ..." if len(problems) > SHOWN else ""), path)
    else:
        log.info("the daily check of tinystore's tables in %s found no damage (%.1fs)", path, took)
    return problems
