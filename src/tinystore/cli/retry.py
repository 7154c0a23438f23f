"""Run a failed job again, its attempts from zero."""

from __future__ import annotations

import argparse
import sys

from ._common import add_job_arguments, get_job, open_queue, open_store, print_json

NAME = "retry"
HELP = "run a failed job again, its attempts from zero"


def configure(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser)


def run(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        queue = open_queue(store, args.queue)
        job = get_job(queue, args.id)
        retried = queue.retry(args.id)
        if not retried:
            job = queue.get(args.id) or job
    if args.json:
        print_json({"queue": args.queue, "id": args.id, "retried": retried})
    elif retried:
        print(f"job {args.id} of queue {args.queue} will run again")
    if not retried:
        print(f"tinystore: job {args.id!r} of queue {args.queue!r} is {job.state}, not failed: "
              "nothing to retry", file=sys.stderr)
        return 1
    return 0
