"""``tinystore show FILE QUEUE ID``: payload, attempts, last error with its traceback, steps, lease holder."""

from __future__ import annotations

import json
import signal
import socket
import time

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


def test_show_and_the_dashboard_say_when_a_running_jobs_holder_is_gone_its_process_dead_or_its_lease_run_out(
        app: App) -> None:
    from starlette.testclient import TestClient

    import tinystore.web
    from tinystore.testing import FakeClock

    clock = FakeClock(time.time())
    looking = tinystore.open(app.db, clock=clock)  # open before the crash: an open ends a dead process's leases
    looking.queue("gated").add({"to": "x"}, id="g1")
    worker = app.serving()
    worker.wait_for("started gated g1 1")
    worker.signal(signal.SIGKILL)
    worker.wait()

    text = app.cli("show", app.db, "gated", "g1")
    assert text.returncode == 0, text.stderr
    assert (f"lease     attempt 1: its holder is gone: no process {worker.pid} runs on this host "
            f"({socket.gethostname()})") in text.stdout
    shown = json.loads(app.cli("show", app.db, "gated", "g1", "--json").stdout)
    assert shown["state"] == "running" and f"no process {worker.pid} runs" in shown["lease"]["gone"]

    dashboard = TestClient(tinystore.web.app(looking, token="t"))
    page = dashboard.get("/api/job", params={"queue": "gated", "id": "g1"}).json()
    assert f"no process {worker.pid} runs on this host" in page["lease"]["gone"]
    assert any("its holder is gone" in event["what"] for event in page["timeline"])
    clock.advance(3600)  # past the lease (30s): it ran out
    page = dashboard.get("/api/job", params={"queue": "gated", "id": "g1"}).json()
    assert "its lease ran out" in page["lease"]["gone"], page["lease"]
    looking.close()


def test_show_says_nothing_is_gone_while_the_holder_runs_the_job(app: App) -> None:
    app.open().queue("gated").add({"to": "x"}, id="g1")
    worker = app.serving()
    worker.wait_for("started gated g1 1")
    shown = json.loads(app.cli("show", app.db, "gated", "g1", "--json").stdout)
    app.release()
    assert shown["lease"]["gone"] is None and shown["lease"]["pid"] == worker.pid
    worker.wait_for("finished gated g1 1")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
