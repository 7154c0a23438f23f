"""``tinystore add FILE QUEUE JSON``: add a job, with an id, a delay and a group; an id adds once."""

from __future__ import annotations

import json

from clitools import App, one_error_line


def add(app: App, *args: str, input: str | None = None) -> dict:
    result = app.cli("add", app.db, *args, "--json", input=input)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_add_puts_a_job_in_the_queue(app: App) -> None:
    echo = app.open().queue("echo")
    job = add(app, "echo", '{"to": "ann", "n": [1, 2]}', "--id", "e1", "--group", "ann")
    assert (job["id"], job["queue"], job["state"], job["added"]) == ("e1", "echo", "waiting", True)
    assert (job["payload"], job["group"], job["attempt"]) == ({"to": "ann", "n": [1, 2]}, "ann", 0)
    kept = echo.get("e1")
    assert (kept.payload, kept.group, kept.state) == ({"to": "ann", "n": [1, 2]}, "ann", "waiting")


def test_add_with_a_delay_schedules_the_job(app: App) -> None:
    echo = app.open().queue("echo")
    job = add(app, "echo", "null", "--id", "later", "--delay", "10m")
    assert job["state"] == "scheduled"
    assert echo.get("later").state == "scheduled"


def test_add_of_an_id_the_queue_keeps_adds_nothing(app: App) -> None:
    echo = app.open().queue("echo")
    add(app, "echo", '{"n": 1}', "--id", "e1")
    again = add(app, "echo", '{"n": 2}', "--id", "e1")
    assert (again["added"], again["payload"]) == (False, {"n": 1})
    assert [j.id for j in echo.jobs()] == ["e1"]

    text = app.cli("add", app.db, "echo", '{"n": 3}', "--id", "e1")
    assert text.returncode == 0 and text.stdout == "job e1 is already in queue echo (waiting): nothing added\n"


def test_add_reads_the_payload_from_stdin_and_makes_an_id_when_none_is_given(app: App) -> None:
    echo = app.open().queue("echo")
    job = add(app, "echo", "-", input='{"from": "stdin"}\n')
    assert job["added"] and len(job["id"]) == 32
    assert echo.get(job["id"]).payload == {"from": "stdin"}


def test_add_with_a_priority_keeps_it_and_jobs_and_show_display_it(app: App) -> None:
    echo = app.open().queue("echo")
    job = add(app, "echo", "null", "--id", "urgent", "--priority", "10")
    assert job["priority"] == 10 and echo.get("urgent").priority == 10
    add(app, "echo", "null", "--id", "plain")
    listed = app.cli("jobs", app.db, "echo")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split()[:3] == ["id", "state", "priority"]
    assert sorted(row.split()[:3] for row in rows) == [["plain", "waiting", "0"], ["urgent", "waiting", "10"]]
    shown = app.cli("show", app.db, "echo", "urgent")
    assert shown.returncode == 0 and any(line.split() == ["priority", "10"] for line in shown.stdout.splitlines())
    refused = app.cli("add", app.db, "echo", "null", "--id", "too-high", "--priority", "101")
    assert refused.returncode != 0 and "priority" in refused.stderr and echo.get("too-high") is None


def test_add_with_a_negative_delay_says_a_duration_is_zero_or_more_and_adds_nothing(app: App) -> None:
    echo = app.open().queue("echo")
    delay, every = app.cli_all(["add", app.db, "echo", "{}", "--delay", "-5m"],
                               ["add", app.db, "echo", "{}", "--id", "tick", "--every", "-1h"])
    assert one_error_line(delay) == ("tinystore: error: delay '-5m' is negative: a duration is zero or more, "
                                     "such as '30s' (queue 'echo', a new job)")
    assert delay.returncode == 2 and delay.stdout == ""
    assert "'-1h' is negative: a duration is zero or more" in one_error_line(every)
    assert echo.jobs() == []
