"""A store whose metrics nobody enabled keeps no metrics state, and never imports tinystore.metrics."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import sys
import tinystore

store = tinystore.open(sys.argv[1], durability="off")
q = store.queue("plain", backoff=("1h", "1h"))

@q.work
def handler(payload, run):
    if payload["boom"]:
        raise ValueError("boom")

q.add_many([{"boom": i % 3 == 0} for i in range(30)])
store.run_until_idle()
assert store.stats()["plain"]["scheduled"] == 10  # the ones that raised, to run again in an hour
print(store._ctx.events, "tinystore.metrics" in sys.modules)
store.close()
"""


def test_a_store_without_metrics_tells_nobody_and_never_loads_the_metrics_module(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "store.db")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "False"]
