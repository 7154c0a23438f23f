"""Run failed jobs again, their attempts from zero (one by its id, or many by ids, group or --state failed)."""

from __future__ import annotations

import argparse
import sys

from tinystore import Queue

from . import _many
from ._common import get_job, open_queue, open_store, print_json

NAME = "retry"
HELP = "run a failed job again, its attempts from zero, or many (--state failed, --group, several ids)"
STATES = ("failed",)


def configure(parser: argparse.ArgumentParser) -> None:
    _many.add_arguments(parser, STATES)
    parser.set_defaults(verb="retry")


def run(args: argparse.Namespace) -> int:
    id = _many.one(args)
    with open_store(args) as store:
        queue = open_queue(store, args.queue)
        if id is None:
            return _retry_many(queue, args)
        job = get_job(queue, id)
        retried = queue.retry(id)
        if not retried:
            job = queue.get(id) or job
    if args.json:
        print_json({"queue": args.queue, "id": id, "retried": retried})
    elif retried:
        print(f"job {id} of queue {args.queue} will run again")
    if not retried:
        print(f"tinystore: job {id!r} of queue {args.queue!r} is {job.state}, not failed: "
              "nothing to retry", file=sys.stderr)
        return 1
    return 0


def _retry_many(queue: Queue, args: argparse.Namespace) -> int:
    if args.yes or _many.confirmed(queue, args, STATES):
        n = queue.retry_many(state=args.state, group=args.group, ids=args.ids or None)
    else:
        n = 0
    return _many.report(queue, args, n, "retried", "will run again")
