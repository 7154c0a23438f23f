"""Results (SPEC §9): what a handler returns is its job's result, kept while the done job is kept.

On every backend, with a fake clock; handlers run with ``run_until_idle``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import tinystore
from tinystore.testing import FakeClock


def test_SPEC_9_what_a_handler_returns_is_the_result_that_get_shows_while_the_done_job_is_kept(
        store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("sums", dedupe="1h")
    q.work(lambda payload, run: {"sum": sum(payload["xs"]), "by": run.id})
    q.add({"xs": [1, 2, 3]}, id="a")
    store.run_until_idle()
    done = q.get("a")
    assert (done.state, done.result) == ("done", {"sum": 6, "by": "a"})
    assert q.jobs(state="done")[0].result == {"sum": 6, "by": "a"}
    clock.advance("1h")
    assert q.get("a") is None  # past dedupe, the job and its result are gone (JOB-11)


def test_SPEC_9_an_async_handler_returns_a_result_too_and_none_is_no_result(store: tinystore.Store) -> None:
    q = store.queue("sums", dedupe="1h")

    @q.work
    async def handler(payload: Any, run: tinystore.AsyncRun) -> Any:
        await asyncio.sleep(0)
        return payload["give"]

    for id, give in (("list", [1, "two", None]), ("text", "ok"), ("zero", 0), ("none", None)):
        q.add({"give": give}, id=id)
    store.run_until_idle()
    assert [(q.get(id).state, q.get(id).result) for id in ("list", "text", "zero", "none")] == [
        ("done", [1, "two", None]), ("done", "ok"), ("done", 0), ("done", None)]


def test_SPEC_9_a_result_that_is_not_json_fails_the_attempt_as_a_raise_would(
        store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("sums", attempts=2, dedupe="1h")
    q.work(lambda payload, run: {1, 2} if run.attempt == 1 else "fine")
    q.add({}, id="a")
    store.run_until_idle()
    retried = q.get("a")
    assert (retried.state, retried.attempt, retried.result) == ("scheduled", 1, None)
    assert "the handler's result is not JSON" in retried.error and "'a'" in retried.error
    clock.advance("1m")  # past the backoff
    store.run_until_idle()
    assert (q.get("a").state, q.get("a").result, q.get("a").error) == ("done", "fine", None)


def test_SPEC_9_a_result_over_one_mebibyte_fails_the_attempt_with_the_limit_named(store: tinystore.Store) -> None:
    q = store.queue("big", attempts=1)
    q.work(lambda payload, run: "x" * (1024 * 1024))
    q.add({}, id="a")
    store.run_until_idle()
    failed = q.get("a")
    assert failed.state == "failed" and failed.result is None
    assert "over the limit of 1048576" in failed.error


def test_SPEC_9_answers_are_not_results(store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("answers", dedupe="1h")
    runs: list[int] = []

    @q.work
    def handler(payload: Any, run: tinystore.Run) -> Any:
        runs.append(run.attempt)
        return run.snooze("1m") if len(runs) == 1 else run.fail("no")

    q.add("snooze", id="s")
    store.run_until_idle()
    assert (q.get("s").state, q.get("s").result) == ("scheduled", None)
    clock.advance("1m")
    store.run_until_idle()
    assert (q.get("s").state, q.get("s").result, q.get("s").error) == ("failed", None, "no")


def test_SPEC_9_watch_ends_with_the_done_state_and_its_result(store: tinystore.Store) -> None:
    q = store.queue("sums", dedupe="1h")
    q.work(lambda payload, run: payload * 2)
    q.add(21, id="a")
    watching = q.watch("a")
    assert next(watching).state == "waiting"
    store.run_until_idle()
    last = list(watching)[-1]
    assert (last.state, last.result) == ("done", 42)
