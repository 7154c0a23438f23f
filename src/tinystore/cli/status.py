"""Show each queue's jobs by state, the age of its oldest due job, its runs in the last minute, and which
queues are paused."""

from __future__ import annotations

import argparse

from ._common import add_json_argument, add_store_argument, age, open_store, print_json, table

NAME = "status"
HELP = "queues by state, oldest due job, runs and failures in the last minute, paused queues"

STATES = ("scheduled", "waiting", "running", "done", "failed")


def configure(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        stats = store.stats()
        path = store.location
    if args.json:
        print_json({"store": path, "queues": stats})
        return 0
    print(f"store {path}")
    if not stats:
        print("no queues yet")
        return 0
    headers = ("queue", *STATES, "repeating", "oldest due", "started/1m", "done/1m", "failed/1m")
    rows = [(name, *(s[state] for state in STATES), s["repeating"], age(s["oldest_due_age"]),
             s["started_last_minute"], s["done_last_minute"], s["failed_last_minute"])
            for name, s in sorted(stats.items())]
    print(table(headers, rows, right=range(1, len(headers))))
    paused = [name for name, s in sorted(stats.items()) if s["paused"]]
    if paused:
        print(f"paused: {', '.join(paused)} (no process starts their jobs; `tinystore resume` lets them)")
    return 0
