"""The commands on schedules and results: ``show`` and ``jobs`` give a repeating job's rule and next
time, ``show`` a done job's result, ``status`` counts the repeating jobs of each queue."""

from __future__ import annotations

import json

import tinystore
from clitools import App


def test_show_and_jobs_give_a_repeating_jobs_rule_and_next_time_and_status_counts_them(app: App) -> None:
    store = app.open()
    nightly = store.schedule("nightly", cron="10 3 * * *", zone="Europe/Moscow")
    digests = store.queue("digests")
    for user in (7, 8):
        digests.add({"user": user}, id=f"digest:{user}", repeat=tinystore.every("1d"))
    digests.add({"user": 9}, id="once")
    next_time = nightly.get("nightly").at

    shown = json.loads(app.cli("show", app.db, "nightly", "nightly", "--json").stdout)
    assert shown["repeat"] == {"rule": 'cron "10 3 * * *" in Europe/Moscow', "cron": "10 3 * * *",
                               "zone": "Europe/Moscow"}
    assert shown["at"] == next_time.isoformat().replace("+00:00", "Z")
    text = app.cli("show", app.db, "nightly", "nightly").stdout
    assert f'repeats   cron "10 3 * * *" in Europe/Moscow; next time {shown["at"]}' in text

    listed = app.cli("jobs", app.db, "digests")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert "every 1d" in rows["digest:7"] and "every 1d" in rows["digest:8"] and "every" not in rows["once"]

    status = json.loads(app.cli("status", app.db, "--json").stdout)["queues"]
    assert (status["nightly"]["repeating"], status["digests"]["repeating"]) == (1, 2)
    assert "repeating" in app.cli("status", app.db).stdout


def test_show_gives_a_done_jobs_result(app: App) -> None:
    store = app.open()
    sums = store.queue("sums", dedupe="1h")
    sums.work(lambda payload, run: {"sum": sum(payload)})
    sums.add([1, 2, 3], id="s")
    store.run_until_idle()
    shown = json.loads(app.cli("show", app.db, "sums", "s", "--json").stdout)
    assert (shown["state"], shown["result"]) == ("done", {"sum": 6})
    assert 'result    {"sum": 6}' in app.cli("show", app.db, "sums", "s").stdout


def test_add_makes_a_repeating_job_and_refuses_a_bad_rule_writing_nothing(app: App) -> None:
    app.open().queue("digests")
    made = app.cli("add", app.db, "digests", '{"user": 7}', "--id", "digest:7", "--cron", "0 8 * * mon",
                   "--zone", "Europe/Berlin", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["repeat"]["rule"] == 'cron "0 8 * * mon" in Europe/Berlin'
    every = app.cli("add", app.db, "digests", "{}", "--id", "digest:8", "--every", "1d")
    assert every.returncode == 0, every.stderr
    for bad, words in ((["--cron", "0 8 * * mon"], "zone"), (["--cron", "0 0 30 feb *", "--zone", "UTC"], "30 feb"),
                       (["--every", "1d", "--zone", "UTC"], "--zone is for --cron"),
                       (["--every", "1d", "--id", "x", "--cron", "* * * * *"], "not allowed with"),
                       (["--every", "soon", "--id", "y"], "soon")):
        args = bad if "--id" in bad else [*bad, "--id", "z"]
        refused = app.cli("add", app.db, "digests", "{}", *args)
        assert refused.returncode == 2 and words in refused.stderr, (bad, refused.stderr)
    no_id = app.cli("add", app.db, "digests", "{}", "--every", "1d")
    assert no_id.returncode == 2 and "needs an id" in no_id.stderr
    assert sorted(j.id for j in app.open().queue("digests").jobs()) == ["digest:7", "digest:8"]
