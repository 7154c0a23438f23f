"""``tinystore cancel FILE QUEUE ID``: a job is taken away, even from the worker that runs it."""

from __future__ import annotations

import json
import signal

from clitools import App
from test_cli_status import mail_queue


def test_cancel_takes_a_waiting_job_away(app: App) -> None:
    mail = mail_queue(app)
    result = app.cli("cancel", app.db, "mail", "m5", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"queue": "mail", "id": "m5", "cancelled": True}
    assert mail.get("m5") is None


def test_cancel_of_a_done_job_changes_nothing_and_exits_1(app: App) -> None:
    mail_queue(app)
    before = app.dump()
    result = app.cli("cancel", app.db, "mail", "m1")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == ["tinystore: job 'm1' of queue 'mail' is done: nothing to cancel"]
    assert app.dump() == before


def test_cancel_of_a_running_job_stops_its_handler_in_the_worker(app: App) -> None:
    hang = app.open().queue("hang")
    hang.add({}, id="h1")
    worker = app.serving("--grace", "60s")
    worker.wait_for("started hang h1 1")

    result = app.cli("cancel", app.db, "hang", "h1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "job h1 of queue hang was running: cancelled\n"
    assert hang.get("h1") is None
    # The handler never ends by itself: the worker exits within the test's time only if the cancel reached it.
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert not [line for line in worker.err if "grace period" in line]
