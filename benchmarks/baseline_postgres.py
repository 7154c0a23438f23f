"""The physical limit on PostgreSQL: the same job rows inserted, updated and deleted with plain psycopg.

The counterpart of ``baseline.py`` for ``run.py --backend postgres``: the same
table shape (queue, id, JSON payload, group, state, time, attempt; a unique
id per queue and a partial index of due jobs; a bigint identity seq), the
same rows (W1's payloads, ids made as tinystore makes them), in a database
of its own on the server, one connection, the run's ``synchronous_commit``
(``on`` at durability full, as PostgreSQL ships; ``off`` at normal and off,
as tinystore sets it). Each statement is one round trip (psycopg 3,
server-side prepared after a few runs); a transaction is ``BEGIN`` ...
``COMMIT``, each its own round trip too, as tinystore's writer sends them.
The figures have the names ``baseline.py`` gives them:

- ``life_single``: jobs/s when each insert, update and delete commits on its own;
- ``life_batched``: jobs/s at 100 rows per transaction;
- ``commit_ms``: one insert's transaction, back to back;
- ``commit_paced_ms``: the same, median of commits made one every 20 ms, as W3 adds its jobs;
- ``round_trip_ms``: the median of ``SELECT 1`` round trips (the floor of any statement).

Run alone: ``python benchmarks/baseline_postgres.py [--postgres URL] [--durability full] [--rows 2000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

import psycopg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from baseline import _row  # noqa: E402  (the same rows as SQLite's baseline)

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
SCHEMA = """
CREATE TABLE jobs (
    seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue    text COLLATE "C" NOT NULL,
    id       text COLLATE "C" NOT NULL,
    payload  text NOT NULL,
    grp      text COLLATE "C",
    state    text NOT NULL,
    at       double precision NOT NULL,
    attempt  integer NOT NULL DEFAULT 0,
    UNIQUE (queue, id)
);
CREATE INDEX jobs_due ON jobs (queue, at, seq) WHERE state = 'queued'
"""
INSERT = "INSERT INTO jobs (queue, id, payload, grp, state, at) VALUES ('bench', %s, %s, NULL, 'queued', %s)"
UPDATE = "UPDATE jobs SET state = 'running', attempt = attempt + 1 WHERE seq = %s"
DELETE = "DELETE FROM jobs WHERE seq = %s"


def synchronous_commit(durability: str) -> str:
    """What tinystore sets for a durability (backends/postgres): on at full, off below."""
    return "on" if durability == "full" else "off"


def _reset(conn: psycopg.Connection, setting: str) -> None:
    conn.execute("DROP TABLE IF EXISTS jobs")
    for statement in SCHEMA.split(";"):
        conn.execute(statement)
    conn.execute(f"SET synchronous_commit = {setting}")


def _phase(conn: psycopg.Connection, sql: str, params: list[tuple], per: int) -> float:
    """Run ``sql`` once per params, ``per`` statements a transaction; return the seconds."""
    began = time.perf_counter()
    for first in range(0, len(params), per):
        conn.execute("BEGIN")
        for p in params[first:first + per]:
            conn.execute(sql, p)
        conn.execute("COMMIT")
    return time.perf_counter() - began


def measure(conn: psycopg.Connection, setting: str, rows: int, per: int) -> dict[str, float]:
    _reset(conn, setting)
    now = time.time()
    inserted = [_row(n, now) for n in range(rows)]
    t_insert = _phase(conn, INSERT, inserted, per)
    seqs = [(s,) for (s,) in conn.execute("SELECT seq FROM jobs ORDER BY seq")]
    t_update = _phase(conn, UPDATE, seqs, per)
    t_delete = _phase(conn, DELETE, seqs, per)
    return {"rows": rows, "per_transaction": per, "insert_per_s": rows / t_insert, "update_per_s": rows / t_update,
            "delete_per_s": rows / t_delete, "life_per_s": rows / (t_insert + t_update + t_delete)}


def scattered(url: str, setting: str, rows: int, every: int, per: int = 200) -> float:
    """Jobs/s of updating then deleting ``rows`` rows, one in ``every`` of the table, ``per`` a transaction
    (W4's groups case, as ``baseline.scattered``)."""
    with psycopg.connect(url, autocommit=True) as conn:
        _reset(conn, setting)
        now = time.time()
        with conn.transaction():
            with conn.cursor() as cur:
                cur.executemany(INSERT, [_row(n, now) for n in range(rows * every)])
        conn.execute("VACUUM ANALYZE jobs")
        conn.execute("CHECKPOINT")
        seqs = [(s,) for (s,) in conn.execute("SELECT seq FROM jobs ORDER BY seq")][::every]
        began = time.perf_counter()
        with conn.cursor() as cur:
            for first in range(0, rows, per):
                for sql in (UPDATE, DELETE):
                    conn.execute("BEGIN")
                    cur.executemany(sql, seqs[first:first + per])
                    conn.execute("COMMIT")
        return rows / (time.perf_counter() - began)


def paced_commit_ms(conn: psycopg.Connection, setting: str, commits: int, interval: float) -> float:
    _reset(conn, setting)
    times = []
    for n in range(commits):
        row = _row(n, time.time())
        began = time.perf_counter()
        _phase(conn, INSERT, [row], 1)
        times.append(time.perf_counter() - began)
        time.sleep(interval)
    return 1000.0 * sorted(times)[len(times) // 2]


def round_trip_ms(conn: psycopg.Connection, count: int = 500) -> float:
    times = []
    for _ in range(count):
        began = time.perf_counter()
        conn.execute("SELECT 1").fetchone()
        times.append(time.perf_counter() - began)
    return 1000.0 * statistics.median(times)


def _best(repeat: int, measure_once: Callable[[], dict[str, float]]) -> dict[str, float]:
    runs = [measure_once() for _ in range(repeat)]
    return {key: max(r[key] for r in runs) for key in runs[0]}


def run(url: str, setting: str, single_rows: int, batched_rows: int, paced: int = 100, interval: float = 0.020,
        repeat: int = 1) -> dict[str, Any]:
    """Every figure on the (empty, made for it) database at ``url``, at ``synchronous_commit = setting``."""
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        single = _best(repeat, lambda: measure(conn, setting, single_rows, 1))
        batched = _best(repeat, lambda: measure(conn, setting, batched_rows, 100))
        paced_ms = paced_commit_ms(conn, setting, paced, interval)
        trip = round_trip_ms(conn)
        conn.execute("DROP TABLE jobs")
    return {
        "synchronous_commit": setting,
        "server_version": version,
        "single": single,
        "batched": batched,
        "insert_single": single["insert_per_s"],
        "life_single": single["life_per_s"],
        "insert_batched": batched["insert_per_s"],
        "life_batched": batched["life_per_s"],
        "commit_ms": 1000.0 / single["insert_per_s"],
        "commit_paced_ms": paced_ms,
        "round_trip_ms": trip,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=ADMIN, help="the admin URL: a database is made there and dropped")
    parser.add_argument("--durability", choices=["full", "normal", "off"], default="full")
    parser.add_argument("--rows", type=int, default=2_000, help="rows of the one-per-transaction phases")
    args = parser.parse_args(argv)
    from common import PostgresTarget
    target = PostgresTarget(os.getcwd(), args.postgres)
    try:
        url = target.new("baseline")
        print(json.dumps(run(url, synchronous_commit(args.durability), args.rows, args.rows * 10), indent=2))
    finally:
        target.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
