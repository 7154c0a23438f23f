"""A repeating job survives a SIGKILL at any moment of its run (SPEC §8), on every backend.

Its rescheduling is its settlement: one transaction. A kill after the run's
work and before that commit leaves the job with its rule, its attempt
counted, and it runs again; a kill at its last attempt makes it wait for
its next time, not fail for good. The witness counts the runs.
"""

from __future__ import annotations

import signal
import time
from datetime import datetime, timedelta, timezone

import tinystore
from helpers import kill_child, wait_child, wait_for_line

LOST = "lease ended without a settlement"
KILLED = -signal.SIGKILL


def next_hour(after: float) -> datetime:
    return datetime.fromtimestamp((int(after // 3600) + 1) * 3600, timezone.utc)


def test_SPEC_8_a_kill_right_after_a_run_and_before_its_settlement_keeps_the_schedule_and_runs_it_again(
        lab, open_store):
    lab.prepare("nightly", [tinystore.Job({"hang_after_on": [1]}, id="nightly", repeat=tinystore.every("1h"),
                                          at=time.time())])
    first = lab.worker("nightly:async", serve=True)
    wait_for_line(first, "handled nightly 1")  # its work is done; the settlement never comes
    assert kill_child(first) == KILLED

    store = open_store()
    job = store.queue("nightly").get("nightly")
    assert (job.state, job.attempt, job.repeat) == ("waiting", 1, tinystore.every("1h"))
    assert LOST in job.error

    second = lab.worker("nightly:async", until_idle=True)
    assert wait_child(second) == 0
    job = store.queue("nightly").get("nightly")
    ended = time.time()
    assert (job.state, job.attempt, job.error, job.repeat) == ("scheduled", 0, None, tinystore.every("1h"))
    assert job.at in (next_hour(ended - 60), next_hour(ended))  # the next hour after the run
    assert [(r.attempt, r.pid) for r in lab.runs("end")] == [(1, first.pid), (2, second.pid)]
    lab.assert_consistent()


def test_SPEC_8_a_kill_at_a_repeating_jobs_last_attempt_makes_it_wait_for_its_next_time_with_its_error(
        lab, open_store):
    lab.prepare("digests", [tinystore.Job({"kill_on": [1]}, id="digest:7", repeat=tinystore.every("1h"),
                                          at=time.time())], attempts=1)
    worker = lab.worker("digests:sync", serve=True)
    assert wait_child(worker) == KILLED  # it kills itself as its run starts

    before = time.time()
    store = open_store()  # ends the dead process's lease at once (DUR-03)
    job = store.queue("digests").get("digest:7")
    assert (job.state, job.attempt, job.repeat) == ("scheduled", 0, tinystore.every("1h"))
    assert LOST in job.error
    assert before < job.at.timestamp() <= before + timedelta(hours=1).total_seconds()
    assert store.stats()["digests"]["failed"] == 0
    lab.assert_consistent()
