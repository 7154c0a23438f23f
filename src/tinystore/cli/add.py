"""Add a job to a queue the store keeps; an id that names a kept job adds nothing (JOB-10)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import tinystore

from ._common import (CommandError, add_json_argument, add_store_argument, job_json, open_queue, open_store,
                      print_json)

NAME = "add"
HELP = "add a job: tinystore add STORE QUEUE '{\"n\": 1}'"


def configure(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("queue", metavar="QUEUE")
    parser.add_argument("payload", metavar="JSON", help="the payload as JSON text, or - to read it from stdin")
    parser.add_argument("--id", help="the job's id (default: a new random one)")
    parser.add_argument("--delay", help="run it after this long, e.g. 10m")
    parser.add_argument("--group", metavar="G", help="the job's group")
    parser.add_argument("--priority", metavar="P", type=int, default=0,
                        help="an int from -100 to 100: due jobs of a higher priority start first (default 0)")
    repeat = parser.add_mutually_exclusive_group()
    repeat.add_argument("--cron", metavar="TEXT", help="repeat it at the times of this cron text (with --zone and --id)")
    repeat.add_argument("--every", metavar="D", help="repeat it at every multiple of this duration (with --id)")
    parser.add_argument("--zone", metavar="Z", help="the named zone of --cron, e.g. Europe/Berlin or UTC")
    add_json_argument(parser)


def _repeat(args: argparse.Namespace) -> Any:
    if args.cron is not None:
        return tinystore.cron(args.cron, zone=args.zone)
    if args.every is not None:
        return tinystore.every(args.every)
    return None


def run(args: argparse.Namespace) -> int:
    payload = _payload(sys.stdin.read() if args.payload == "-" else args.payload)
    if args.zone is not None and args.cron is None:
        raise CommandError("--zone is for --cron")
    with open_store(args) as store:
        queue = open_queue(store, args.queue)
        job = queue.add(payload, id=args.id, delay=args.delay, group=args.group, repeat=_repeat(args),
                        priority=args.priority)
    if args.json:
        print_json({**job_json(job), "added": job.added})
    elif job.added:
        print(f"added job {job.id} to queue {job.queue}: {job.state}")
    else:
        print(f"job {job.id} is already in queue {job.queue} ({job.state}): nothing added")
    return 0


def _payload(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CommandError(f"the payload is not JSON: {exc}") from None
