"""``tinystore show FILE QUEUE ID``: payload, attempts, last error with its traceback, steps, lease holder."""

from __future__ import annotations

import json
import signal
import socket

import tinystore
from clitools import App


def test_show_gives_a_failed_jobs_payload_error_with_traceback_and_kept_steps(app: App) -> None:
    store = app.open()
    report = store.queue("report", attempts=1)

    @report.work
    def build(payload: dict, run: tinystore.Run) -> None:
        run.step("fetch", lambda: {"rows": 3})
        raise RuntimeError("the printer is on fire")

    report.add({"month": "2026-11"}, id="r1", group="acme")
    store.run_until_idle()

    result = app.cli("show", app.db, "report", "r1", "--json")
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert (job["id"], job["queue"], job["state"], job["group"]) == ("r1", "report", "failed", "acme")
    assert (job["payload"], job["attempt"], job["attempts"]) == ({"month": "2026-11"}, 1, 1)
    assert job["error"].startswith("RuntimeError: the printer is on fire")
    assert "Traceback (most recent call last)" in job["error"] and "in build" in job["error"]
    assert job["steps"] == [{"name": "fetch", "attempt": 1, "answer": {"rows": 3}}]
    assert job["lease"] is None

    text = app.cli("show", app.db, "report", "r1")
    assert text.returncode == 0, text.stderr
    assert "state     failed" in text.stdout and "attempt   1 of 1" in text.stdout
    assert '  fetch (attempt 1): {"rows": 3}' in text.stdout
    assert "  Traceback (most recent call last):" in text.stdout


def test_show_names_the_process_that_holds_a_running_jobs_lease(app: App) -> None:
    app.open().queue("gated").add({"to": "x"}, id="g1")
    worker = app.serving()
    worker.wait_for("started gated g1 1")

    result = app.cli("show", app.db, "gated", "g1", "--json")
    app.release()
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert (job["state"], job["attempt"]) == ("running", 1)
    assert job["lease"]["pid"] == worker.pid and job["lease"]["host"] == socket.gethostname()
    assert job["lease"]["attempt"] == 1

    worker.wait_for("finished gated g1 1")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
