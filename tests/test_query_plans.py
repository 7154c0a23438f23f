"""SQLite's plans: no statement of the backend scans the jobs table or the groups table, or sorts what
it read of them.

Each due job is in one index (by queue, priority, time and seq; a group's jobs by queue, group,
priority, time and seq), and every read of the due jobs, of a group's head and of the ready groups
walks it priority by priority. EXPLAIN QUERY PLAN of every statement, on a store of many jobs of
several priorities, groups and times, says SEARCH for each read of those tables, in the order the
statement asks for: a statement that scans them, or that reads a group's jobs or the ready groups in
time order as if an index by time alone were there (it reads all of them, and sorts), fails here.
"""

from __future__ import annotations

import re
import sqlite3
import time
from contextlib import closing
from typing import Any

import tinystore
from tinystore.backends.sqlite._sql import Q, R

# The one statement that reads every group of the store on purpose: a seek per group (and per priority).
READS_EVERY_GROUP = {"scheduled_counts"}
# The statements that sort what they read on purpose: the due jobs up to a waiting one, in start order
# (ahead_many), the running jobs by id (as many as run), a queue's groups with leases by their count.
SORT = {"ahead_many", "jobs_page_running", "busiest_groups"}
DROPPED = {"tinystore_jobs_due", "tinystore_jobs_group_due", "tinystore_groups_ready"}


class AnyValue(dict):
    """Named parameters: 1 for each (a plan does not depend on the values SQLite binds)."""

    def __missing__(self, key: str) -> int:
        return 1


def names_of(table: str, sql: str) -> set[str]:
    """The table's name in a statement, and its aliases there."""
    aliases = re.findall(rf"\b{table}\s+(?:AS\s+)?([a-z]\w*)", sql)
    keywords = {"where", "set", "on", "join", "indexed", "using", "order", "group", "limit", "values"}
    return {table} | {a for a in aliases if a.lower() not in keywords}


def plan(conn: sqlite3.Connection, sql: str) -> list[tuple[int, str]]:
    """The plan's lines, each with the node it is under."""
    named = re.search(r"(?<![:\w]):[A-Za-z_]", sql)
    params: Any = AnyValue() if named else (1,) * sql.count("?")
    return [(row[1], row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


def misread(lines: list[tuple[int, str]], tables: set[str], sorts: bool) -> list[str]:
    """The lines of a plan that scan one of ``tables``, and (unless ``sorts``) the sorts of a node that
    reads one of them."""
    def reads(text: str, how: str) -> bool:
        found = re.match(rf"(?:{how}) (\w+)", text)
        return found is not None and found.group(1) in tables
    bad = [text for _, text in lines if reads(text, "SCAN")]
    if not sorts:
        for node in {parent for parent, _ in lines}:
            under = [text for parent, text in lines if parent == node]
            if any(reads(text, "SCAN|SEARCH") for text in under):
                bad += [text for text in under if text.startswith("USE TEMP B-TREE FOR") and "ORDER BY" in text]
    return bad


def test_no_statement_scans_the_jobs_or_the_groups(tmp_path) -> None:
    path = str(tmp_path / "store.db")
    store = tinystore.open(path, durability="off")
    try:
        now = time.time()
        for name in ("mail", "crawl"):
            q = store.queue(name, lease="1h", group_concurrency=2)
            q.add_many([tinystore.Job({"n": n}, group=f"site:{n % 40}" if n % 3 else None, priority=(0, 5, -2)[n % 3],
                                      at=now + (-60, 60, 86_400)[n % 3 if n % 2 else 0]) for n in range(3_000)])
            store.queue(name).add({}, id="one more", delay=3_600)
    finally:
        store.close()
    with closing(sqlite3.connect(path)) as conn:
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert not indexes & DROPPED
        assert {"tinystore_jobs_due_priority", "tinystore_jobs_group_priority",
                "tinystore_groups_ready_priority"} <= indexes
        misreads = {}
        for name, sql in {**Q, **R}.items():
            tables = names_of("tinystore_jobs", sql)
            if name not in READS_EVERY_GROUP:
                tables |= names_of("tinystore_groups", sql)
            found = misread(plan(conn, sql), tables, name in SORT)
            if found:
                misreads[name] = found
        assert misreads == {}
