"""``tinystore jobs FILE QUEUE``: a page of a queue's jobs, by state or group, page after page."""

from __future__ import annotations

import json

from clitools import App
from test_cli_status import mail_queue


def jobs(app: App, *args: str) -> dict:
    result = app.cli("jobs", app.db, "mail", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_jobs_lists_a_queues_jobs_in_the_order_they_were_added(app: App) -> None:
    mail_queue(app)
    page = jobs(app)
    assert [(j["id"], j["state"], j["attempt"]) for j in page["jobs"]] == [
        ("m1", "done", 1), ("m2", "failed", 1), ("m3", "waiting", 0), ("m4", "waiting", 0), ("m5", "scheduled", 0)]
    assert page["next_after"] is None
    failed = page["jobs"][1]
    assert failed["error"].startswith("ValueError: no such mailbox") and failed["payload"] == {"fail": True}


def test_jobs_filters_by_state_and_group(app: App) -> None:
    mail_queue(app)
    failed, waiting, grouped = app.cli_all(["jobs", app.db, "mail", "--state", "failed", "--json"],
                                           ["jobs", app.db, "mail", "--state", "waiting", "--json"],
                                           ["jobs", app.db, "mail", "--group", "g", "--json"])
    assert [j["id"] for j in json.loads(failed.stdout)["jobs"]] == ["m2"]
    assert [j["id"] for j in json.loads(waiting.stdout)["jobs"]] == ["m3", "m4"]
    assert [(j["id"], j["group"]) for j in json.loads(grouped.stdout)["jobs"]] == [("m3", "g")]


def test_jobs_pages_with_limit_and_after(app: App) -> None:
    mail_queue(app)
    first = jobs(app, "--limit", "2")
    assert [j["id"] for j in first["jobs"]] == ["m1", "m2"] and first["next_after"] == "m2"
    second = jobs(app, "--limit", "2", "--after", first["next_after"])
    assert [j["id"] for j in second["jobs"]] == ["m3", "m4"]

    result = app.cli("jobs", app.db, "mail", "--limit", "2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "state", "priority", "attempt", "at", "group", "repeats", "error"]
    assert lines[1].split()[:4] == ["m1", "done", "0", "1/1"]
    assert lines[2].split()[:4] == ["m2", "failed", "0", "1/1"] and lines[2].endswith("ValueError: no such mailbox")
    assert lines[-1] == "more: --after m2"
