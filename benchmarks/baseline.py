"""The physical limit: the same job rows inserted, updated and deleted with the standard sqlite3 module.

The table has the shape of tinystore's jobs table (queue, id, JSON payload,
group, state, time, attempt; a unique id per queue and a partial index of due
jobs) and its rows are the rows tinystore writes (W1's payloads, ids made as
tinystore makes them: the time in milliseconds, then 80 random bits), in WAL mode at the run's ``synchronous`` setting. Each phase (insert
every row, then update each as a claim would, then delete each as a
settlement would) runs once with one row per transaction and once with 100
rows per transaction. A job's life is its three phases:

- ``life_single``: jobs/s when each insert, update and delete commits on its own
  (three commits per job);
- ``life_batched``: jobs/s at 100 rows per transaction (three commits per 100 jobs);
- ``commit_ms``: one insert's transaction, the cost of one commit (back to back);
- ``commit_paced_ms``: the same, median of commits made one every 20 ms, as W3
  adds its jobs: a commit after an idle pause costs more than one of a stream.

Run alone: ``python benchmarks/baseline.py [--durability full] [--rows 2000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import payload  # noqa: E402

SCHEMA = """
CREATE TABLE jobs (
    seq      INTEGER PRIMARY KEY,
    queue    TEXT NOT NULL,
    id       TEXT NOT NULL,
    payload  TEXT NOT NULL,
    grp      TEXT,
    state    TEXT NOT NULL,
    at       REAL NOT NULL,
    attempt  INTEGER NOT NULL DEFAULT 0,
    UNIQUE (queue, id)
);
CREATE INDEX jobs_due ON jobs (queue, at, seq) WHERE state = 'queued';
"""
INSERT = "INSERT INTO jobs (queue, id, payload, grp, state, at) VALUES ('bench', ?, ?, NULL, 'queued', ?)"
UPDATE = "UPDATE jobs SET state = 'running', attempt = attempt + 1 WHERE seq = ?"
DELETE = "DELETE FROM jobs WHERE seq = ?"


def job_id(now: float) -> str:
    """An id as tinystore makes one when none is given (32 hex digits)."""
    return f"{int(now * 1000):012x}{random.getrandbits(80):020x}"


def _row(n: int, now: float) -> tuple:
    return (job_id(now), json.dumps(payload(n), separators=(",", ":")), now)


def _connect(path: str, synchronous: str) -> sqlite3.Connection:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.executescript(SCHEMA)
    return conn


def _phase(conn: sqlite3.Connection, sql: str, params: list[tuple], per: int) -> float:
    """Run ``sql`` once per params, ``per`` statements a transaction; return the seconds."""
    began = time.perf_counter()
    for first in range(0, len(params), per):
        conn.execute("BEGIN")
        for p in params[first:first + per]:
            conn.execute(sql, p)
        conn.execute("COMMIT")
    return time.perf_counter() - began


def measure(path: str, synchronous: str, rows: int, per: int) -> dict[str, float]:
    """Insert, update and delete ``rows`` job rows at ``per`` rows a transaction; rows/s of each phase."""
    conn = _connect(path, synchronous)
    try:
        now = time.time()
        inserted = [_row(n, now) for n in range(rows)]
        t_insert = _phase(conn, INSERT, inserted, per)
        seqs = [(s,) for (s,) in conn.execute("SELECT seq FROM jobs ORDER BY seq")]
        t_update = _phase(conn, UPDATE, seqs, per)
        t_delete = _phase(conn, DELETE, seqs, per)
    finally:
        conn.close()
    return {"rows": rows, "per_transaction": per, "insert_per_s": rows / t_insert, "update_per_s": rows / t_update,
            "delete_per_s": rows / t_delete, "life_per_s": rows / (t_insert + t_update + t_delete)}


def scattered(path: str, synchronous: str, rows: int, every: int, per: int = 200) -> float:
    """Jobs/s of updating then deleting ``rows`` rows, one in ``every`` of the table, ``per`` a transaction.

    W4's groups case: the jobs outside the hot group are one row in ten of
    the file, so each claimed or removed job has a page of its own to write.
    """
    conn = _connect(path, synchronous)
    try:
        now = time.time()
        conn.execute("BEGIN")
        conn.executemany(INSERT, [_row(n, now) for n in range(rows * every)])
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        seqs = [(s,) for (s,) in conn.execute("SELECT seq FROM jobs ORDER BY seq")][::every]
        began = time.perf_counter()
        for first in range(0, rows, per):
            for sql in (UPDATE, DELETE):
                conn.execute("BEGIN")
                conn.executemany(sql, seqs[first:first + per])
                conn.execute("COMMIT")
        return rows / (time.perf_counter() - began)
    finally:
        conn.close()


def paced_commit_ms(path: str, synchronous: str, commits: int, interval: float) -> float:
    """The median time of one insert's transaction, made one every ``interval`` seconds."""
    conn = _connect(path, synchronous)
    times = []
    try:
        for n in range(commits):
            row = _row(n, time.time())
            began = time.perf_counter()
            _phase(conn, INSERT, [row], 1)
            times.append(time.perf_counter() - began)
            time.sleep(interval)
    finally:
        conn.close()
    return 1000.0 * sorted(times)[len(times) // 2]


def best_of(repeat: int, path: str, synchronous: str, rows: int, per: int) -> dict[str, float]:
    """``measure`` ``repeat`` times; each rate the best of them, as tinystore's figures are with --repeat."""
    runs = [measure(path, synchronous, rows, per) for _ in range(repeat)]
    return {key: max(r[key] for r in runs) for key in runs[0]}


def run(workdir: str, synchronous: str, single_rows: int, batched_rows: int, paced: int = 100,
        interval: float = 0.020, repeat: int = 1) -> dict[str, Any]:
    path = os.path.join(workdir, "baseline.db")
    single = best_of(repeat, path, synchronous, single_rows, 1)
    batched = best_of(repeat, path, synchronous, batched_rows, 100)
    paced_ms = paced_commit_ms(path, synchronous, paced, interval)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return {
        "synchronous": synchronous,
        "single": single,
        "batched": batched,
        "insert_single": single["insert_per_s"],
        "life_single": single["life_per_s"],
        "insert_batched": batched["insert_per_s"],
        "life_batched": batched["life_per_s"],
        "commit_ms": 1000.0 / single["insert_per_s"],
        "commit_paced_ms": paced_ms,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durability", choices=["full", "normal", "off"], default="full")
    parser.add_argument("--rows", type=int, default=2_000, help="rows of the one-per-transaction phases")
    args = parser.parse_args(argv)
    synchronous = args.durability.upper()
    with tempfile.TemporaryDirectory(prefix="tinystore-baseline-") as workdir:
        print(json.dumps(run(workdir, synchronous, args.rows, args.rows * 10), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
