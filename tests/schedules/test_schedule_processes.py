"""Several processes declaring one schedule at the same moment make one job (SPEC §8), on every backend.

Each child opens the store, waits on the same barrier (a line on its stdin,
written to all of them at once), declares the schedule with its own payload
and prints what it got back.
"""

from __future__ import annotations

import json
import subprocess

import tinystore
from helpers import start_child, wait_child, wait_for_line

DECLARE = """
import json, sys
import tinystore
store = tinystore.open(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
queue = store.schedule("nightly", cron="10 3 * * *", zone="Europe/Moscow", payload={"by": int(sys.argv[2])})
job = queue.get("nightly")
print(json.dumps({"payload": job.payload}), flush=True)
store.close()
"""


def test_SPEC_8_several_processes_declaring_one_schedule_at_once_make_one_job(target: str, child_env: dict) -> None:
    children = [start_child(DECLARE, target, str(i), env=child_env, stdin=subprocess.PIPE) for i in range(4)]
    for child in children:
        wait_for_line(child, "ready")
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    told = [json.loads(wait_for_line(child, "{")) for child in children]
    assert all(wait_child(child) == 0 for child in children)

    with tinystore.open(target) as store:
        jobs = store.queue("nightly").jobs()
        assert [j.id for j in jobs] == ["nightly"]
        assert jobs[0].payload in [t["payload"] for t in told]  # the newest declaration's
        assert str(jobs[0].repeat) == 'cron "10 3 * * *" in Europe/Moscow'
