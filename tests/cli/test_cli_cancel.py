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


def test_cancel_with_filters_counts_the_jobs_and_without_a_terminal_needs_yes(app: App) -> None:
    mail = mail_queue(app)
    before = app.dump()
    result = app.cli("cancel", app.db, "mail", "--state", "waiting")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "tinystore: error: this would cancel 2 jobs of queue 'mail': give --yes to do it (nothing was changed)"]
    assert app.dump() == before

    result = app.cli("cancel", app.db, "mail", "--state", "waiting", "--yes")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2 jobs of queue mail cancelled\n"
    assert mail.get("m3") is None and mail.get("m4") is None and mail.get("m5").state == "scheduled"


def test_cancel_of_several_ids_or_a_group_takes_those_the_filters_list(app: App) -> None:
    mail = mail_queue(app)
    result = app.cli("cancel", app.db, "mail", "m1", "m4", "m5", "nobody", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"queue": "mail", "cancelled": 2}  # m1 is done: not cancelled
    assert mail.get("m4") is None and mail.get("m5") is None and mail.get("m1").state == "done"
    result = app.cli("cancel", app.db, "mail", "m3", "m1", "--group", "g", "--yes")
    assert (result.returncode, result.stdout) == (0, "1 job of queue mail cancelled\n"), result.stderr
    result = app.cli("cancel", app.db, "mail", "--group", "g", "--yes")
    assert result.returncode == 1 and result.stdout == "0 jobs of queue mail cancelled\n"


def test_cancel_with_a_state_it_cannot_cancel_or_no_jobs_named_is_refused(app: App) -> None:
    mail_queue(app)
    before = app.dump()
    result = app.cli("cancel", app.db, "mail", "--state", "failed", "--yes")
    assert result.returncode == 2 and "invalid choice: 'failed'" in result.stderr
    result = app.cli("cancel", app.db, "mail")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "tinystore: error: name the jobs to cancel: one ID or more, or --state and/or --group"]
    assert app.dump() == before


def test_cancel_of_many_at_a_terminal_asks_first_and_acts_only_on_yes(app: App) -> None:
    mail = mail_queue(app)
    before = app.dump()
    result = app.cli_at_a_terminal("cancel", app.db, "mail", "m3", "m4", "m5", answer="n\n")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "Cancel 3 jobs of queue 'mail'? [y/N] tinystore: error: nothing was changed\n"
    assert app.dump() == before
    result = app.cli_at_a_terminal("cancel", app.db, "mail", "m3", "m4", "m5", answer="y\n")
    assert (result.returncode, result.stdout) == (0, "3 jobs of queue mail cancelled\n"), result.stderr
    assert [mail.get(id) for id in ("m3", "m4", "m5")] == [None, None, None]
