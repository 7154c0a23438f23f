"""Take scheduled, waiting or running jobs away (one by its id, or many by ids, state or group); a running
handler is told, and settles nothing."""

from __future__ import annotations

import argparse
import sys

from tinystore import Queue

from . import _many
from ._common import get_job, open_queue, open_store, print_json

NAME = "cancel"
HELP = "take a scheduled, waiting or running job away, or many (--state, --group, several ids)"
STATES = ("scheduled", "waiting", "running")


def configure(parser: argparse.ArgumentParser) -> None:
    _many.add_arguments(parser, STATES)
    parser.set_defaults(verb="cancel")


def run(args: argparse.Namespace) -> int:
    id = _many.one(args)
    with open_store(args) as store:
        queue = open_queue(store, args.queue)
        if id is None:
            return _cancel_many(queue, args)
        job = get_job(queue, id)
        cancelled = queue.cancel(id)
    if args.json:
        print_json({"queue": args.queue, "id": id, "cancelled": cancelled})
    elif cancelled:
        print(f"job {id} of queue {args.queue} was {job.state}: cancelled")
    if not cancelled:
        print(f"tinystore: job {id!r} of queue {args.queue!r} is {job.state}: nothing to cancel",
              file=sys.stderr)
        return 1
    return 0


def _cancel_many(queue: Queue, args: argparse.Namespace) -> int:
    if args.yes or _many.confirmed(queue, args, STATES):
        n = queue.cancel_many(state=args.state, group=args.group, ids=args.ids or None)
    else:
        n = 0
    return _many.report(queue, args, n, "cancelled", "cancelled")
