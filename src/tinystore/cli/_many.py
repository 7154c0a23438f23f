"""What ``cancel`` and ``retry`` share when they act on many jobs: the filters, the count, the confirmation.

``tinystore cancel STORE QUEUE ID`` acts on one job, as before. Given
several ids, or ``--state``/``--group`` (with ids: those of them the filters
list), the command counts the jobs it would act on and asks before acting;
``--yes`` answers for it, counting nothing (without a terminal it is
needed). Then it calls ``cancel_many``/``retry_many``, which walk the queue
in short transactions.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from tinystore import Queue

from ._common import CommandError, add_json_argument, add_store_argument, print_json

PAGE = 10_000  # jobs read per page while counting


def add_arguments(parser: argparse.ArgumentParser, states: Sequence[str]) -> None:
    """STORE QUEUE [ID ...] [--state S] [--group G] [--yes] [--schema NAME] [--json]."""
    add_store_argument(parser)
    parser.add_argument("queue", metavar="QUEUE")
    parser.add_argument("ids", metavar="ID", nargs="*",
                        help="the jobs' ids; with --state or --group, those of them that the filters list")
    parser.add_argument("--state", choices=states, help="only the jobs in this state, as `tinystore jobs` lists them")
    parser.add_argument("--group", metavar="GROUP", help="only the jobs of this group")
    parser.add_argument("--yes", action="store_true",
                        help="act on many jobs without asking (needed where stdin is not a terminal)")
    add_json_argument(parser)


def one(args: argparse.Namespace) -> Optional[str]:
    """The id of the one job the command names, or None where it names many (or none: refused)."""
    if args.state is None and args.group is None:
        if not args.ids:
            raise CommandError(f"name the jobs to {args.verb}: one ID or more, or --state and/or --group")
        if len(args.ids) == 1:
            return str(args.ids[0])
    return None


def count(queue: Queue, args: argparse.Namespace, states: Sequence[str]) -> int:
    """How many jobs the filters name now, in the states the command acts on (read, not written)."""
    ids = set(args.ids) if args.ids else None
    if ids is not None and args.state is None and args.group is None:
        return sum(1 for id in ids if (job := queue.get(id)) is not None and job.state in states)
    n, after = 0, None
    while True:
        page = queue.jobs(state=args.state, group=args.group, limit=PAGE, after=after)
        n += sum(1 for job in page if job.state in states and (ids is None or job.id in ids))
        if len(page) < PAGE:
            return n
        after = page[-1].id


def confirmed(queue: Queue, args: argparse.Namespace, states: Sequence[str]) -> bool:
    """Without ``--yes``: count the jobs, and ask before acting on them (False: there are none). Where
    stdin is not a terminal, nobody can answer: refused, saying how many and to give ``--yes``."""
    n = count(queue, args, states)
    if not n:
        return False
    what = f"{args.verb} {n} job{'s' if n != 1 else ''} of queue {queue.name!r}"
    if not sys.stdin.isatty():
        raise CommandError(f"this would {what}: give --yes to do it (nothing was changed)")
    sys.stderr.write(f"{what[0].upper()}{what[1:]}? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CommandError("nothing was changed", code=1)
    return True


def report(queue: Queue, args: argparse.Namespace, done: int, key: str, past: str) -> int:
    if args.json:
        print_json({"queue": queue.name, key: done})
    else:
        print(f"{done} job{'s' if done != 1 else ''} of queue {queue.name} {past}")
    return 0 if done else 1
