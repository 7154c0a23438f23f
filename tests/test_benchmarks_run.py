"""The benchmark suite runs: ``benchmarks/run.py --small`` exits 0 and writes valid JSON (SQLite, and
PostgreSQL where a server answers at ``TINYSTORE_BENCH_POSTGRES`` or the local default; under CI=true it must).

It runs at ``--durability off`` so that the disk's fsync time does not make it slow; the
code it runs is the same at every durability.

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
    assert {row["workload"] for row in latest["rows"]} == {"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9"}
    assert not [row["case"] for row in latest["rows"] if row["case"].startswith("failed")]


ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _postgres_unreachable() -> str | None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from common import reachable
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return reachable(os.environ.get("TINYSTORE_BENCH_POSTGRES", ADMIN_URL))


def test_the_small_postgres_benchmark_run_exits_0_and_writes_json_with_every_workload(tmp_path: Path) -> None:
    admin = os.environ.get("TINYSTORE_BENCH_POSTGRES", ADMIN_URL)
    why = _postgres_unreachable()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the PostgreSQL server at {admin} cannot be reached: {why}")
        pytest.skip(f"no PostgreSQL server at {admin} (set TINYSTORE_BENCH_POSTGRES to another): {why}")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--small", "--backend", "postgres",
                           "--postgres", admin, "--results", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    latest = json.loads((tmp_path / "latest.json").read_text())
    assert latest["environment"]["backend"] == "postgres"
    assert latest["environment"]["postgres"]["server_version"]
    assert latest["baseline"]["synchronous_commit"] == "on"
    assert latest["baseline"]["insert_single"] > 0 and latest["baseline"]["life_batched"] > 0
    assert {row["workload"] for row in latest["rows"]} == {"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9"}
    assert not [row["case"] for row in latest["rows"] if row["case"].startswith("failed")]
    import psycopg
    with psycopg.connect(admin, autocommit=True) as conn:  # every database the run made is dropped
        prefix = latest["environment"]["postgres"]["database_prefix"]
        left = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (prefix + "%",)).fetchall()
    assert left == []
