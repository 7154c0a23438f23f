"""``tinystore status FILE``: jobs per queue and state, the oldest due job's age, the last minute's runs."""

from __future__ import annotations

import json

import tinystore
from clitools import App


def mail_queue(app: App) -> tinystore.Queue:
    """A queue with one job in each state: done, failed, two waiting, one scheduled."""
    store = app.open()
    mail = store.queue("mail", attempts=1, dedupe="1h")

    @mail.work
    def send(payload: dict, run: tinystore.Run) -> None:
        if payload.get("fail"):
            raise ValueError("no such mailbox")

    mail.add({}, id="m1")
    mail.add({"fail": True}, id="m2")
    store.run_until_idle()
    mail.add({}, id="m3", group="g")
    mail.add({}, id="m4")
    mail.add({}, id="m5", delay="10m")
    return mail


def test_status_counts_each_queues_jobs_by_state_with_the_last_minutes_runs(app: App) -> None:
    mail_queue(app)
    result = app.cli("status", app.db, "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)

    assert status["store"] == app.db
    mail = status["queues"]["mail"]
    assert {state: mail[state] for state in ("scheduled", "waiting", "running", "done", "failed")} == {
        "scheduled": 1, "waiting": 2, "running": 0, "done": 1, "failed": 1}
    assert mail["oldest_due_age"] >= 0
    assert (mail["started_last_minute"], mail["done_last_minute"], mail["failed_last_minute"]) == (2, 1, 1)
    assert status["queues"]["echo"]["waiting"] == 0 and status["queues"]["echo"]["oldest_due_age"] is None


def test_status_prints_a_table_for_people(app: App) -> None:
    mail_queue(app)
    result = app.cli("status", app.db)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"store {app.db}"
    assert lines[1].split()[:6] == ["queue", "scheduled", "waiting", "running", "done", "failed"]
    mail = next(line for line in lines if line.startswith("mail "))
    assert mail.split()[:6] == ["mail", "1", "2", "0", "1", "1"]
    assert mail.split()[-3:] == ["2", "1", "1"]
