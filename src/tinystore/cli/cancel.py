"""Take a scheduled, waiting or running job away; a running handler is told, and settles nothing."""

from __future__ import annotations

import argparse
import sys

from ._common import add_job_arguments, get_job, open_queue, open_store, print_json

NAME = "cancel"
HELP = "take a scheduled, waiting or running job away"


def configure(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser)


def run(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        queue = open_queue(store, args.queue)
        job = get_job(queue, args.id)
        cancelled = queue.cancel(args.id)
    if args.json:
        print_json({"queue": args.queue, "id": args.id, "cancelled": cancelled})
    elif cancelled:
        print(f"job {args.id} of queue {args.queue} was {job.state}: cancelled")
    if not cancelled:
        print(f"tinystore: job {args.id!r} of queue {args.queue!r} is {job.state}: nothing to cancel",
              file=sys.stderr)
        return 1
    return 0
