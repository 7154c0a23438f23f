"""List a page of a queue's jobs in the order they were added; the next page is --after the last id."""

from __future__ import annotations

import argparse

from ._common import (add_json_argument, add_store_argument, first_line, iso, job_json, open_queue, open_store,
                      print_json, table)

NAME = "jobs"
HELP = "a page of a queue's jobs, by state or group"


def configure(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("queue", metavar="QUEUE")
    parser.add_argument("--state", choices=("scheduled", "waiting", "running", "done", "failed"))
    parser.add_argument("--group", metavar="G", help="only the jobs of this group")
    parser.add_argument("--limit", type=int, default=100, metavar="N", help="jobs per page (default 100)")
    parser.add_argument("--after", metavar="ID", help="the page after this job id")
    add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        queue = open_queue(store, args.queue)
        page = queue.jobs(state=args.state, group=args.group, limit=args.limit, after=args.after)
    after = page[-1].id if len(page) == args.limit else None
    if args.json:
        print_json({"queue": args.queue, "jobs": [job_json(job) for job in page], "next_after": after})
        return 0
    if not page:
        print("no jobs")
        return 0
    rows = [(job.id, job.state, str(job.priority), f"{job.attempt}/{job.attempts}", iso(job.at), job.group or "",
             str(job.repeat) if job.repeat is not None else "", first_line(job.error)) for job in page]
    print(table(("id", "state", "priority", "attempt", "at", "group", "repeats", "error"), rows))
    if after is not None:
        print(f"more: --after {after}")
    return 0
