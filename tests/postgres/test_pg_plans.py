"""PostgreSQL's plans of the reads that walk the due indexes by priority: each read of the jobs is a range
or a probe of an index, never a sequential scan of them, a hash join with all of a queue's due jobs, nor
a sort of a group's jobs by time (as if an index by time alone were there).

Checked before the server has statistics of the jobs (a store just filled) and after ANALYZE: the
planner's choice changes with them, and neither may read the jobs whole. One read is left as it was:
``ahead`` counts the due jobs of every group of the queue, which the planner may read by a scan once
they are a good part of the table (a filter of ``grp IS NOT NULL`` with no group named).
"""

from __future__ import annotations

import re
import time

import tinystore
from tinystore.backends.postgres._sql import schema

READS = ["ahead", "ahead_many", "head_of_group", "groups_update", "scheduled_counts", "first_due", "next_times"]


def plans(pg, store_schema: str, params: dict) -> dict[str, list[str]]:
    q = schema(store_schema).statements
    found = {}
    with pg.connect() as conn:  # one transaction, rolled back: groups_update writes nothing kept
        for name in READS:
            found[name] = [line for (line,) in conn.execute("EXPLAIN " + q[name], params)]
        conn.rollback()
    return found


def every_group(lines: list[str], at: int) -> bool:
    """Whether the scan at ``at`` reads the due jobs of every group of the queue (its filter names none)."""
    condition = lines[at + 1] if at + 1 < len(lines) else ""
    return "grp IS NOT NULL" in condition and "grp = " not in condition


def whole_reads(found: dict[str, list[str]]) -> dict[str, list[str]]:
    bad = {name: [line.strip() for at, line in enumerate(lines)
                  if ("Seq Scan on jobs" in line and not every_group(lines, at)) or "Hash Join" in line
                  or re.search(r"Sort Key: .*\bj(obs)?\w*\.at\b", line)]
           for name, lines in found.items()}
    return {name: lines for name, lines in bad.items() if lines}


def test_the_reads_by_priority_read_the_jobs_by_their_indexes(pg):
    store = pg.open()
    q = store.queue("mail", lease="1h")
    now = time.time()
    for first in range(0, 6_000, 1_000):
        q.add_many([tinystore.Job({"n": n}, group=f"site:{n % 30}" if n % 2 else None, priority=(0, 5, -2)[n % 3],
                                  at=now + (-60, 60, 86_400)[n % 3]) for n in range(first, first + 1_000)])
    waiting = q.add({}, id="waiting", delay=0)
    params = {"queue": "mail", "now": time.time(), "priority": 0, "at": waiting.at.timestamp(), "seq": 3_000,
              "seqs": [1, 2, 3], "grp": "site:1", "change": 0, "limit": 1 << 62}
    assert whole_reads(plans(pg, pg.schema, params)) == {}
    pg.rows("ANALYZE {s}.jobs")
    pg.rows("ANALYZE {s}.groups")
    assert whole_reads(plans(pg, pg.schema, params)) == {}
