"""The metrics of a store on PostgreSQL: the same counts, and the gauges read from its database."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import kits
import pytest
from scrape import samples

import tinystore
import tinystore.metrics
from tinystore.testing import FakeClock


@pytest.fixture
def pg_store(tmp_path: Path) -> Iterator[tinystore.Store]:
    """A store in a database of its own on the test server; under CI=true a missing server fails the test."""
    kit = kits.PostgresKit(tmp_path)
    store = tinystore.open(kit.new_target("metrics"), clock=FakeClock())
    try:
        yield store
    finally:
        store.close()
        kit.cleanup()


def test_counts_and_gauges_of_a_postgresql_store(pg_store: tinystore.Store) -> None:
    q = pg_store.queue("pg-q", attempts=2, backoff=("1s", "1s"))

    @q.work
    async def handler(payload: dict, run: tinystore.AsyncRun) -> None:
        if payload["boom"]:
            raise ValueError("boom")

    q.add_many([{"boom": False}, {"boom": False}, {"boom": True}])
    q.add({"boom": False}, delay="1h")
    q.add({"boom": False}, id="later", delay="1h")
    tinystore.metrics.enable(pg_store)
    q.add({"boom": False}, id="later")  # its id is taken: adds nothing
    q.add({"boom": True})
    pg_store.run_until_idle()
    pg_store.queue("pg-held").pause()

    got = samples(tinystore.metrics.prometheus_text(pg_store))
    assert {name: got[(f"tinystore_jobs_{name}_total", "pg-q")]
            for name in ("added", "started", "done", "failed", "retried")} == {
        "added": 1, "started": 4, "done": 2, "failed": 0, "retried": 2}
    assert got[("tinystore_run_seconds_count", "pg-q")] == 4
    assert (got[("tinystore_jobs_waiting", "pg-q")], got[("tinystore_jobs_running", "pg-q")]) == (0, 0)
    assert (got[("tinystore_queue_paused", "pg-q")], got[("tinystore_queue_paused", "pg-held")]) == (0, 1)
    assert pg_store.stats()["pg-q"]["scheduled"] == 4  # two retries, two jobs next hour
