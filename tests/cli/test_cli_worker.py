"""``tinystore worker``: serving jobs other processes add, shutting down on signals, surviving SIGKILL, logging."""

from __future__ import annotations

import json
import signal

import tinystore
from clitools import App


def test_a_worker_runs_the_jobs_another_process_adds_on_the_queues_it_is_told(app: App) -> None:
    worker = app.serving("--queues", "echo")
    started = worker.wait_for("INFO tinystore.cli: worker", "err")
    assert f"worker {worker.pid} started" in started and "queues echo," in started

    added = app.cli("add", app.db, "echo", '{"n": 1}', "--id", "e1", "--json")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["added"] is True
    assert app.cli("add", app.db, "gated", "{}", "--id", "g1").returncode == 0  # not a queue it serves
    worker.wait_for("ran echo e1 1")

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert app.witnessed() == ["ran echo e1 1"]
    jobs = app.open()
    assert (jobs.queue("echo").get("e1").state, jobs.queue("echo").get("e1").attempt) == ("done", 1)
    assert (jobs.queue("gated").get("g1").state, jobs.queue("gated").get("g1").attempt) == ("waiting", 0)


def test_sigterm_lets_the_running_handler_finish_and_exits_0_with_no_attempt_counted_for_jobs_never_started(
        app: App) -> None:
    gated = app.open().queue("gated")
    for id in ("g1", "g2", "g3"):
        gated.add({}, id=id)
    worker = app.serving("--workers", "1")
    worker.wait_for("started gated g1 1")

    worker.signal(signal.SIGTERM)
    worker.wait_for("SIGTERM: finishing running handlers", "err")
    app.release()
    assert worker.wait() == 0

    assert app.witnessed() == ["started gated g1 1", "finished gated g1 1"]
    g1, g2, g3 = (gated.get(id) for id in ("g1", "g2", "g3"))
    assert (g1.state, g1.attempt, g1.error) == ("done", 1, None)
    assert [(j.state, j.attempt) for j in (g2, g3)] == [("waiting", 0), ("waiting", 0)]


def test_handlers_still_running_past_the_grace_period_are_cancelled_and_their_jobs_go_to_the_next_attempt(
        app: App) -> None:
    store = app.open()
    store.queue("hang").add({}, id="h1")
    store.queue("gated").add({}, id="g1")  # a def handler: its thread cannot be stopped, the worker exits anyway
    worker = app.serving("--grace", "200ms")
    worker.wait_for("started hang h1 1")
    worker.wait_for("started gated g1 1")

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    worker.wait_for("still ran after the 0.2s grace period", "err")
    for queue, id in (("hang", "h1"), ("gated", "g1")):
        job = store.queue(queue).get(id)
        assert (job.state, job.attempt) == ("waiting", 1), job
        assert "lease ended without a settlement" in job.error
    assert "finished gated g1 1" not in app.witnessed()


def test_a_second_signal_exits_at_once_and_the_next_worker_runs_the_job_again(app: App) -> None:
    app.open().queue("gated").add({}, id="g1")
    first = app.serving()
    first.wait_for("started gated g1 1")
    first.signal(signal.SIGTERM)
    first.wait_for("SIGTERM: finishing running handlers", "err")
    first.signal(signal.SIGTERM)
    assert first.wait() == 128 + signal.SIGTERM

    second = app.serving()
    second.wait_for("finished gated g1 2")
    second.signal(signal.SIGINT)
    assert second.wait() == 0
    assert app.witnessed() == ["started gated g1 1", "started gated g1 2", "finished gated g1 2"]


def test_after_sigkill_a_new_worker_runs_the_job_again(app: App) -> None:
    gated = app.open().queue("gated")
    gated.add({}, id="g1")
    first = app.serving()
    first.wait_for("started gated g1 1")
    first.signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL

    second = app.serving()
    second.wait_for("finished gated g1 2")
    second.signal(signal.SIGTERM)
    assert second.wait() == 0
    assert app.witnessed() == ["started gated g1 1", "started gated g1 2", "finished gated g1 2"]
    job = gated.get("g1")
    assert (job.state, job.attempt) == ("done", 2)


def test_each_failure_is_logged_with_its_queue_job_id_and_attempt(app: App) -> None:
    boom = app.open().queue("boom")
    boom.add({}, id="b1")
    worker = app.serving()
    first = worker.wait_for("boom/b1 attempt 1 failed", "err")
    second = worker.wait_for("boom/b1 attempt 2 failed", "err")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0

    assert first.endswith("[queue=boom job=b1 attempt=1]") and "WARNING tinystore.worker" in first
    assert second.endswith("[queue=boom job=b1 attempt=2]") and "ValueError: boom b1" in second
    job = boom.get("b1")
    assert (job.state, job.attempt) == ("failed", 2)


def test_log_level_debug_shows_tinystore_debug_records_each_ending_with_its_queue_job_and_attempt(app: App) -> None:
    app.open().queue("echo").add({}, id="e1")
    worker = app.serving("--log-level", "debug", "--queues", "echo")
    starts = worker.wait_for("DEBUG tinystore.worker: echo/e1 attempt 1 starts", "err")
    done = worker.wait_for("DEBUG tinystore.worker: echo/e1 attempt 1 done", "err")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert starts.endswith("[queue=echo job=e1 attempt=1]"), starts
    assert done.endswith("[queue=echo job=e1 attempt=1]"), done


QUIET_APP = """
import logging

logging.getLogger().setLevel(logging.WARNING)  # the application quiets its libraries

from app_jobs import store
"""


def test_log_level_debug_shows_tinystore_records_even_when_the_application_sets_the_root_logger_higher(
        app: App) -> None:
    (app.folder / "quiet_app.py").write_text(QUIET_APP)
    app.open().queue("echo").add({}, id="e1")
    worker = app.worker("--log-level", "debug", "--queues", "echo", target="quiet_app:store")
    worker.wait_for("INFO tinystore.store: serving", "err")
    starts = worker.wait_for("DEBUG tinystore.worker: echo/e1 attempt 1 starts", "err")
    assert starts.endswith("[queue=echo job=e1 attempt=1]"), starts
    worker.wait_for("ran echo e1 1")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_at_the_default_log_level_the_worker_shows_no_debug_records(app: App) -> None:
    app.open().queue("echo").add({}, id="e1")
    worker = app.serving("--queues", "echo")
    worker.wait_for("ran echo e1 1")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert not [line for line in worker.err if " DEBUG " in line], worker.err


def test_at_the_default_log_level_the_worker_writes_no_line_per_done_job_and_counts_them_per_queue_when_it_stops(
        app: App) -> None:
    echo = app.open().queue("echo")
    echo.add_many([tinystore.Job({}, id=f"e{i}") for i in range(5)])
    worker = app.serving("--queues", "echo")
    for i in range(5):
        worker.wait_for(f"ran echo e{i} 1")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert not [line for line in worker.err if "e0" in line or " done in " in line], worker.err
    counted = worker.wait_for("INFO tinystore.worker: queue echo: 5 attempts ended in the last", "err")
    assert "(5 done); handlers ran " in counted and counted.endswith("[queue=echo]"), counted
    worker.wait_for(f"worker {worker.pid} started", "err")
    worker.wait_for(f"worker {worker.pid} stopped", "err")
