"""``tinystore retry FILE QUEUE ID``: a failed job runs again, its attempts from zero."""

from __future__ import annotations

import json

from clitools import App
from test_cli_status import mail_queue


def test_retry_makes_a_failed_job_wait_again_with_its_attempts_from_zero(app: App) -> None:
    mail = mail_queue(app)
    result = app.cli("retry", app.db, "mail", "m2", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"queue": "mail", "id": "m2", "retried": True}
    job = mail.get("m2")
    assert (job.state, job.attempt) == ("waiting", 0)


def test_retry_of_a_job_that_has_not_failed_changes_nothing_and_exits_1(app: App) -> None:
    mail = mail_queue(app)
    before = app.dump()
    result = app.cli("retry", app.db, "mail", "m4", "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["retried"] is False
    assert result.stderr.splitlines() == [
        "tinystore: job 'm4' of queue 'mail' is waiting, not failed: nothing to retry"]
    assert app.dump() == before and mail.get("m4").state == "waiting"


def test_retry_of_every_failed_job_counts_them_and_without_a_terminal_needs_yes(app: App) -> None:
    mail = mail_queue(app)
    before = app.dump()
    result = app.cli("retry", app.db, "mail", "--state", "failed")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "tinystore: error: this would retry 1 job of queue 'mail': give --yes to do it (nothing was changed)"]
    assert app.dump() == before
    result = app.cli("retry", app.db, "mail", "--state", "failed", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"queue": "mail", "retried": 1}
    assert (mail.get("m2").state, mail.get("m2").attempt) == ("waiting", 0)
    result = app.cli("retry", app.db, "mail", "m2", "m4", "--yes")
    assert result.returncode == 1 and result.stdout == "0 jobs of queue mail will run again\n"
