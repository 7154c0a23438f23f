"""The benchmark suite runs: ``benchmarks/run.py --small`` exits 0 and writes valid JSON (SQLite, every workload;
PostgreSQL, one of them, where a server answers at ``TINYSTORE_BENCH_POSTGRES`` or the local default; under
CI=true it must),
W9's rows say a rate against its ideal for each process count, and a PostgreSQL run through the relay
(``--relay``) says the relay's delay and counts round trips (W10).

Both run at ``--durability off`` (on PostgreSQL, ``synchronous_commit = off``) so that the disk's
fsync time does not make them slow; the code they run is the same at every durability.

No figure is checked: timing belongs in docs/benchmarks.md, not in a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "W11", "W12", "W13"]
POSTGRES_SMOKE = ["W1"]


def test_the_small_benchmark_run_exits_0_and_writes_json_with_every_workload(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--small", "--durability", "off",
                           "--results", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    latest = json.loads((tmp_path / "latest.json").read_text())
    stamped = [p for p in tmp_path.glob("*.json") if p.name != "latest.json"]
    assert len(stamped) == 1 and json.loads(stamped[0].read_text()) == latest
    assert latest["environment"]["cores"] and latest["environment"]["sqlite"] and latest["environment"]["python"]
    assert latest["environment"]["durability"] == "off"
    assert latest["baseline"]["insert_single"] > 0 and latest["baseline"]["life_batched"] > 0
    assert {row["workload"] for row in latest["rows"]} == set(WORKLOADS)
    assert not [row["case"] for row in latest["rows"] if row["case"].startswith("failed")]


ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _postgres_unreachable() -> str | None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from common import reachable
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return reachable(os.environ.get("TINYSTORE_BENCH_POSTGRES", ADMIN_URL))


def test_a_small_postgres_benchmark_run_exits_0_and_writes_json(tmp_path: Path) -> None:
    admin = os.environ.get("TINYSTORE_BENCH_POSTGRES", ADMIN_URL)
    why = _postgres_unreachable()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the PostgreSQL server at {admin} cannot be reached: {why}")
        pytest.skip(f"no PostgreSQL server at {admin} (set TINYSTORE_BENCH_POSTGRES to another): {why}")
    # A smoke test of the runner on PostgreSQL: one workload, at the small size (every workload runs on SQLite
    # above, and in benchmarks/ at full size).
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--small", "--backend", "postgres",
                           "--only", ",".join(POSTGRES_SMOKE), "--postgres", admin, "--durability", "off",
                           "--results", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    latest = json.loads((tmp_path / "latest.json").read_text())
    assert latest["environment"]["backend"] == "postgres"
    assert latest["environment"]["postgres"]["server_version"]
    assert latest["environment"]["durability"] == "off" and latest["baseline"]["synchronous_commit"] == "off"
    assert latest["baseline"]["insert_single"] > 0 and latest["baseline"]["life_batched"] > 0
    assert {row["workload"] for row in latest["rows"]} == set(POSTGRES_SMOKE)
    assert not [row["case"] for row in latest["rows"] if row["case"].startswith("failed")]
    import psycopg
    with psycopg.connect(admin, autocommit=True) as conn:  # every database the run made is dropped
        prefix = latest["environment"]["postgres"]["database_prefix"]
        left = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (prefix + "%",)).fetchall()
    assert left == []


def _run(tmp_path: Path, *args: str, timeout: float = 600) -> dict:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--small", "--results", str(tmp_path),
                           *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp_path / "latest.json").read_text())


def _w9_rows_say_a_rate_against_the_ideal_per_process_count(latest: dict) -> None:
    rows = [row for row in latest["rows"] if row["workload"] == "W9"]
    assert [row["extra"]["ideal"] for row in rows] == [400.0, 800.0]  # 1 and 2 processes x 20 / 50 ms
    assert [len(row["extra"]["ran_by_process"]) for row in rows] == [1, 2]
    for row in rows:
        assert row["value"] > 0 and row["unit"] == "jobs/s" and row["ratio"] == row["value"] / row["extra"]["ideal"]
        assert not row["extra"]["ran_out"]


def test_w9_says_each_process_counts_steady_rate_against_the_ideal_on_sqlite(tmp_path: Path) -> None:
    latest = _run(tmp_path, "--only", "W9", "--durability", "off")
    _w9_rows_say_a_rate_against_the_ideal_per_process_count(latest)


def test_w9_says_each_process_counts_steady_rate_against_the_ideal_on_postgres(tmp_path: Path) -> None:
    admin = _postgres_or_skip()
    latest = _run(tmp_path, "--only", "W9", "--backend", "postgres", "--postgres", admin)
    _w9_rows_say_a_rate_against_the_ideal_per_process_count(latest)


def test_a_postgres_run_through_the_relay_says_its_delay_and_counts_round_trips(tmp_path: Path) -> None:
    admin = _postgres_or_skip()
    latest = _run(tmp_path, "--only", "W1,W10", "--backend", "postgres", "--postgres", admin, "--relay", "0.25")
    assert latest["environment"]["relay_ms"] == 0.25
    base = latest["baseline"]
    assert base["round_trip_ms"] > base["direct_round_trip_ms"]  # the raw baseline went through the relay too
    rows = {row["case"]: row for row in latest["rows"]}
    assert not [case for case in rows if case.startswith("failed")]
    per_add = rows["add alone: every connection, per add"]
    assert per_add["unit"] == "round trips" and per_add["value"] >= 1
    kinds = {row["extra"]["phase"] + ": " + case.split("per ", 1)[1].split(" (")[0]
             for case, row in rows.items() if "phase" in row["extra"]}
    assert {"add alone: add", "a job's path: claim cycle", "leases held: renewal"} <= kinds


def _postgres_or_skip() -> str:
    admin = os.environ.get("TINYSTORE_BENCH_POSTGRES", ADMIN_URL)
    why = _postgres_unreachable()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the PostgreSQL server at {admin} cannot be reached: {why}")
        pytest.skip(f"no PostgreSQL server at {admin} (set TINYSTORE_BENCH_POSTGRES to another): {why}")
    return admin
