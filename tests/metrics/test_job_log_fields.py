"""Every log record about a job carries the same extra fields, so that one job can be followed across attempts."""

from __future__ import annotations

import logging

import pytest

import tinystore
from tinystore.testing import FakeClock

FIELDS = ("tinystore_queue", "tinystore_job", "tinystore_attempt", "tinystore_outcome", "tinystore_duration")


def test_each_record_about_a_retried_job_names_its_queue_job_attempt_and_outcome(
        store: tinystore.Store, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    q = store.queue("trace", attempts=3, backoff=("1s", "1s"))

    @q.work
    def handler(payload: dict, run: tinystore.Run) -> None:
        clock.advance("0.5s")
        if run.attempt < 3:
            raise ValueError(f"attempt {run.attempt} fails")

    other = store.queue("other")
    other.work(lambda payload, run: None)
    q.add({}, id="traced")
    other.add({}, id="traced")  # the same id in another queue: another job
    caplog.set_level(logging.DEBUG, logger="tinystore")
    for _ in range(3):
        store.run_until_idle()
        clock.advance("2s")  # past the backoff, jittered

    records = [r for r in caplog.records if getattr(r, "tinystore_job", None) == "traced"]
    assert records and all(all(hasattr(r, name) for name in FIELDS) for r in records)
    about = [r for r in records if r.tinystore_queue == "trace"]
    assert [(r.tinystore_attempt, r.tinystore_outcome) for r in about] == [
        (1, "started"), (1, "retried"), (2, "started"), (2, "retried"), (3, "started"), (3, "done")]
    assert [r.tinystore_duration for r in about if r.tinystore_outcome == "started"] == [None] * 3
    assert [r.tinystore_duration for r in about if r.tinystore_outcome != "started"] == [pytest.approx(0.5)] * 3
    assert q.get("traced") is None  # done, and not kept: the records are all that is left of it


def test_a_job_that_fails_for_good_says_so_in_its_last_record(store: tinystore.Store,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    q = store.queue("doomed", attempts=1)

    @q.work
    def handler(payload: dict, run: tinystore.Run) -> None:
        return run.fail("no way")

    q.add({}, id="d1")
    caplog.set_level(logging.INFO, logger="tinystore")
    store.run_until_idle()
    last = [r for r in caplog.records if getattr(r, "tinystore_job", None) == "d1"][-1]
    assert (last.levelname, last.tinystore_attempt, last.tinystore_outcome) == ("ERROR", 1, "failed")
