"""``tinystore pause FILE [QUEUE ...]`` and ``tinystore resume``: no process starts a paused queue's jobs."""

from __future__ import annotations

import json

from clitools import App, one_error_line
from test_cli_status import mail_queue


def test_pause_and_resume_a_named_queue_for_every_process_and_status_shows_it(app: App) -> None:
    mail = mail_queue(app)
    result = app.cli("pause", app.db, "mail", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"paused": ["mail"], "unchanged": []}
    assert mail.paused is True and app.open().queue("echo").paused is False

    status = app.cli("status", app.db, "--json")
    queues = json.loads(status.stdout)["queues"]
    assert (queues["mail"]["paused"], queues["echo"]["paused"]) == (True, False)
    text = app.cli("status", app.db).stdout.splitlines()
    assert text[-1].startswith("paused: mail (")

    result = app.cli("resume", app.db, "mail")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "queue mail resumed\n"
    assert mail.paused is False
    assert not any(line.startswith("paused:") for line in app.cli("status", app.db).stdout.splitlines())


def test_pause_and_resume_without_a_queue_act_on_every_queue(app: App) -> None:
    store = app.open()
    result = app.cli("pause", app.db)
    assert result.returncode == 0, result.stderr
    names = store.queues()
    assert result.stdout.splitlines() == [f"queue {name} paused" for name in names]
    assert all(store.queue(name).paused for name in names)
    result = app.cli("resume", app.db, "--json")
    assert json.loads(result.stdout) == {"resumed": names, "unchanged": []}
    assert not any(store.queue(name).paused for name in names)


def test_resume_of_a_queue_not_paused_and_pause_of_a_paused_one_say_nothing_changed(app: App) -> None:
    mail = mail_queue(app)
    resumed = app.cli("resume", app.db, "mail")
    assert (resumed.returncode, resumed.stdout) == (0, "queue mail was not paused: nothing changed\n")
    assert json.loads(app.cli("resume", app.db, "mail", "--json").stdout) == {"resumed": [], "unchanged": ["mail"]}
    assert mail.paused is False
    assert app.cli("pause", app.db, "mail").stdout == "queue mail paused\n"
    paused = app.cli("pause", app.db, "mail", "echo", "--json")
    assert json.loads(paused.stdout) == {"paused": ["echo"], "unchanged": ["mail"]}
    assert app.cli("pause", app.db, "mail").stdout == "queue mail was paused already: nothing changed\n"


def test_a_queue_the_store_does_not_keep_is_refused_naming_it_and_nothing_is_paused(app: App) -> None:
    mail_queue(app)
    before = app.dump()
    for args in (["mail", "nope"], ["Bad Name"]):
        result = app.cli("pause", app.db, *args)
        assert result.returncode == 2
        assert f"no queue named {args[-1]!r}" in one_error_line(result)
    assert app.dump() == before, "nothing was written, not even the queue named first"


def test_a_serving_worker_starts_nothing_of_a_paused_queue_until_it_is_resumed(app: App) -> None:
    store = app.open()
    assert app.cli("pause", app.db, "echo").returncode == 0
    worker = app.serving()
    store.queue("echo").add({}, id="e1")
    store.queue("gated").add({}, id="g1")  # added after e1: the worker heard of e1 when it starts g1
    worker.wait_for("started gated g1 1")
    app.release()
    worker.wait_for("finished gated g1 1")
    assert not [line for line in app.witnessed() if "echo" in line]
    assert store.queue("echo").get("e1").state == "waiting"
    assert app.cli("resume", app.db, "echo").returncode == 0
    worker.wait_for("ran echo e1 1")  # the resume's notice woke the worker: nothing else was due
