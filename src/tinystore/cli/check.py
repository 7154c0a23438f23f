"""Read every page of a store file and say whether it is damaged; exit 0 when it is whole, 1 when not.

SQLite keeps no checksums, so damage in the middle of a file shows only when
a statement reads the damaged page, or never: a damaged index can hide jobs
from every worker without an error. This runs SQLite's ``integrity_check``
(every page, and every index against its table) or, with ``--quick``,
``quick_check`` (every page, without comparing the indexes with their
tables), then reads each job's id and payload as a worker would and counts
the jobs per state against what ``stats()`` reads. It opens the file
read-only and writes nothing; workers may go on meanwhile. The check
itself is the backend's (``tinystore.backends.check``); this prints it.

A PostgreSQL store (a ``postgresql://`` URL) is refused, exit 2: the server
checks its own pages (data checksums, ``pg_amcheck``).
"""

from __future__ import annotations

import argparse
from typing import Any

from tinystore import backends

from ._common import add_json_argument, add_store_argument, print_json

NAME = "check"
HELP = "read every page of a SQLite store file: exit 0 when whole, 1 when damaged"

MOST = 100  # problems read from the database's check
SHOWN = 20  # problems and unreadable jobs printed for people (--json has them all)


def configure(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser, schema=False)
    parser.add_argument("--quick", action="store_true",
                        help="quick_check: every page, but not every index against its table (faster)")
    add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    found = backends.check(args.store, quick=args.quick, limit=MOST)
    report = {
        "file": found.location, "check": found.method, "ok": found.ok, "pages": found.pages, "jobs": found.jobs,
        "problems": found.problems,
        "unreadable_jobs": [{"seq": j.seq, "queue": j.queue, "id": j.id, "why": j.why} for j in found.unreadable_jobs],
        "advice": found.advice,
    }
    if args.json:
        print_json(report)
    else:
        _print(report)
    return 0 if report["ok"] else 1


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
