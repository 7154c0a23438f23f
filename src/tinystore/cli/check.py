"""Read every page of a store file and say whether it is damaged; exit 0 when it is whole, 1 when not.

SQLite keeps no checksums, so damage in the middle of a file shows only when
a statement reads the damaged page, or never: a damaged index can hide jobs
from every worker without an error. This runs SQLite's ``PRAGMA
integrity_check`` (every page, and every index against its table) or, with
``--quick``, ``quick_check`` (every page, without comparing the indexes with
their tables), then reads each job's id and payload as a worker would. It
opens the file read-only and writes nothing; workers may go on meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
from typing import Any, Optional

from tinystore.backends.sqlite._damage import is_damage

from ._common import CommandError, add_json_argument, add_store_argument, check_sqlite_file, print_json
from ._readonly import connect_read_only

NAME = "check"
HELP = "read every page of a store file: exit 0 when whole, 1 when damaged"

MOST = 100  # problems read from SQLite's check
SHOWN = 20  # problems and unreadable jobs printed for people (--json has them all)
# What integrity_check says of an index, or of a page no table or index uses: the tables are whole.
INDEX_ONLY = re.compile(r"row \d+ missing from index \S+|non-unique entry in index \S+|Page \d+ is never used")


def configure(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--quick", action="store_true",
                        help="quick_check: every page, but not every index against its table (faster)")
    add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    check_sqlite_file(args.file, "a tinystore store")
    path = os.path.abspath(args.file)
    report = examine(path, "quick_check" if args.quick else "integrity_check")
    if args.json:
        print_json(report)
    else:
        _print(report)
    return 0 if report["ok"] else 1


def examine(path: str, pragma: str) -> dict[str, Any]:
    """What SQLite's check and a read of every job found in the store at ``path``."""
    problems: list[str] = []
    unreadable: list[dict[str, Any]] = []
    pages = jobs = None
    try:
        conn = connect_read_only(path)
    except sqlite3.Error as exc:
        conn = None
        _found(exc, problems, path)
    if conn is not None:
        try:
            if not _is_store(conn, problems, path):
                raise CommandError(f"{path} is not a tinystore store: it has no tinystore tables")
            pages = _check(conn, pragma, problems, path)
            jobs = _read_jobs(conn, unreadable, problems, path)
        finally:
            conn.close()
    ok = not problems and not unreadable
    return {"file": path, "check": pragma, "ok": ok, "pages": pages, "jobs": jobs, "problems": problems,
            "unreadable_jobs": unreadable, "advice": None if ok else _advice(path, problems, unreadable)}


def _found(exc: sqlite3.Error, problems: list[str], path: str) -> None:
    """A database error met while checking: damage is a problem found; anything else is not a check."""
    code = getattr(exc, "sqlite_errorcode", None)
    if is_damage(exc) or (isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_IOERR):
        problems.append(f"{exc} ({getattr(exc, 'sqlite_errorname', type(exc).__name__)})")
        return
    raise CommandError(f"cannot check {path}: {exc}") from None


def _is_store(conn: sqlite3.Connection, problems: list[str], path: str) -> bool:
    try:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'"
                            " AND name = 'tinystore_migrations'").fetchone() is not None
    except sqlite3.Error as exc:  # its schema cannot be read: damaged, whatever it held
        _found(exc, problems, path)
        return True


def _check(conn: sqlite3.Connection, pragma: str, problems: list[str], path: str) -> Optional[int]:
    try:
        rows = conn.execute(f"PRAGMA {pragma}({MOST})").fetchall()
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    except sqlite3.Error as exc:
        _found(exc, problems, path)
        return None
    said = [line for (text,) in rows for line in str(text).splitlines() if not line.startswith("*** ")]
    if said != ["ok"]:
        problems.extend(said)
    return pages


def _read_jobs(conn: sqlite3.Connection, unreadable: list[dict[str, Any]], problems: list[str],
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
                unreadable.append({"seq": seq, "queue": _shown(queue), "id": _shown(id), "why": why})
    except sqlite3.Error as exc:
        _found(exc, problems, path)
        return None
    return count


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


def _advice(path: str, problems: list[str], unreadable: list[dict[str, Any]]) -> str:
    if not problems:
        return (f"the file is whole but {len(unreadable)} job(s) cannot be read: a worker fails each for good "
                "when it claims it, with an error that says so, and the queue goes on; restore the file from "
                "a backup to get them back")
    if all(INDEX_ONLY.fullmatch(p) for p in problems):
        return (f"the tables are whole; only indexes (or pages no table uses) are damaged, and a damaged "
                f"index can hide waiting jobs from every worker: stop every worker, copy the file, rebuild "
                f"them with: sqlite3 {path} 'REINDEX; VACUUM;', then run tinystore check again")
    return (f"stop every worker and restore {path} from a backup; the sqlite3 shell's .recover "
            f"(sqlite3 {path} .recover) may save what is left of its rows")


def _print(report: dict[str, Any]) -> None:
    path, pragma, problems, unreadable = report["file"], report["check"], report["problems"], report["unreadable_jobs"]
    if report["ok"]:
        print(f"{path}: ok: {pragma} found no damage in its {report['pages']} pages, and each of its "
              f"{report['jobs']} jobs reads")
        return
    print(f"{path}: damaged")
    if problems:
        more = " or more" if len(problems) >= MOST else ""
        print(f"{pragma} found {len(problems)}{more} problems:")
        _lines(problems)
    if unreadable:
        print(f"{len(unreadable)} jobs cannot be read:")
        _lines([f"queue {j['queue']!r}, job {j['id']!r} (seq {j['seq']}): {j['why']}" for j in unreadable])
    print(f"what to do: {report['advice']}")


def _lines(lines: list[str]) -> None:
    for line in lines[:SHOWN]:
        print(f"  {line}")
    if len(lines) > SHOWN:
        print(f"  ... and {len(lines) - SHOWN} more (--json lists them all)")
