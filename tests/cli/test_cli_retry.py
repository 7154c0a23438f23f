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
