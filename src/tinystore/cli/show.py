"""Show one job: payload, attempts, last error with its traceback, the steps kept, and who holds its lease."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tinystore._holders import holder_gone
from tinystore.backends._base import JobDetail

from ._common import CommandError, add_job_arguments, age, job_json, open_queue, open_store, print_json

NAME = "show"
HELP = "one job: payload, attempts, error and traceback, steps, lease holder"


def configure(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser)


def run(args: argparse.Namespace) -> int:
    with open_store(args, read_only=True) as store:
        queue = open_queue(store, args.queue)
        found = queue.detail(args.id)
        if found is None:
            raise CommandError(f"no job {args.id!r} in queue {queue.name!r}")
        job, detail = found
        data = job_json(job, ahead=True)
        now = store.clock.now()
        data.update(_detail(detail, now))
    if args.json:
        print_json(data)
    else:
        _print(data, now)
    return 0


def _detail(detail: JobDetail, now: float) -> dict[str, Any]:
    """The steps kept under the job (their answers decoded from JSON text) and its lease holder, with why
    it is gone where it is (``gone``, else None)."""
    steps = [{"name": s.name, "attempt": s.attempt, "answer": json.loads(s.answer)} for s in detail.steps]
    lease = None
    if detail.lease is not None:
        held = detail.lease
        lease = {"attempt": held.attempt, "expires": held.expires, "pid": held.pid, "host": held.host,
                 "gone": holder_gone(held, now)}
    return {"steps": steps, "lease": lease}


def _print(data: dict[str, Any], now: float) -> None:
    lines = [
        ("queue", data["queue"]), ("id", data["id"]), ("state", data["state"]), ("priority", data["priority"]),
        ("attempt", f"{data['attempt']} of {data['attempts']}"), ("at", data["at"]),
        ("group", data["group"] or "-"), ("payload", json.dumps(data["payload"], ensure_ascii=False)),
    ]
    if data["state"] == "waiting":
        lines.append(("ahead", data["ahead"]))
    if data["repeat"] is not None:
        lines.append(("repeats", f"{data['repeat']['rule']}; next time {data['at']}"))
    if data["progress"] is not None:
        lines.append(("progress", json.dumps(data["progress"], ensure_ascii=False)))
    if data["result"] is not None:
        lines.append(("result", json.dumps(data["result"], ensure_ascii=False)))
    lease = data["lease"]
    if lease is not None and lease["gone"]:
        lines.append(("lease", f"attempt {lease['attempt']}: its holder is gone: {lease['gone']}"))
    elif lease is not None:
        lines.append(("lease", f"attempt {lease['attempt']} held by pid {lease['pid']} on {lease['host']}, "
                               f"ends in {age(max(0.0, lease['expires'] - now))} unless renewed"))
    for label, value in lines:
        print(f"{label:<9} {value}")
    if data["steps"]:
        print("steps")
        for step in data["steps"]:
            answer = json.dumps(step["answer"], ensure_ascii=False)
            print(f"  {step['name']} (attempt {step['attempt']}): {answer}")
    if data["error"]:
        print("error")
        for line in data["error"].splitlines():
            print(f"  {line}")
