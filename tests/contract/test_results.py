"""Results (SPEC §9): what a handler returns is its job's result, kept while the done job is kept.

On every backend, with a fake clock; handlers run with ``run_until_idle``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

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


def test_SPEC_9_wait_returns_the_last_state_with_its_result_once_a_job_ran_elsewhere(
        store: tinystore.Store) -> None:
    q = store.queue("sums", dedupe="1h")
    q.work(lambda payload, run: payload["a"] + payload["b"])
    q.add({"a": 2, "b": 3}, id="s")
    worker = threading.Thread(target=store.run_until_idle)
    worker.start()
    done = q.wait("s", timeout="30s")
    worker.join()
    assert (done.state, done.result) == ("done", 5)
    assert q.wait("s") == done  # an ended job: at once
    assert q.wait("nobody") is None


def test_SPEC_9_wait_async_and_its_timeout(store: tinystore.Store) -> None:
    q = store.queue("sums", attempts=1)
    q.work(lambda payload, run: run.fail("no"))
    q.add({}, id="later", delay="1h")
    q.add({}, id="now")

    async def main() -> tuple:
        with pytest.raises(TimeoutError, match="'later'.*not ended after 0.05s"):
            await q.wait_async("later", timeout="50ms")
        waiting = asyncio.ensure_future(q.wait_async("now", timeout=30))
        await asyncio.get_running_loop().run_in_executor(None, store.run_until_idle)
        return await waiting

    failed = asyncio.run(main())
    assert (failed.state, failed.error) == ("failed", "no")
    with pytest.raises(TimeoutError, match="'later'"):
        q.wait("later", timeout=0.05)
    assert q.get("later").state == "scheduled"  # the job goes on


def test_SPEC_9_waiting_for_a_repeating_job_is_refused(store: tinystore.Store) -> None:
    q = store.queue("digests")
    q.add({}, id="d", repeat=tinystore.every("1d"))
    with pytest.raises(tinystore.InvalidArgument, match="repeats .* never ends"):
        q.wait("d")
    with pytest.raises(tinystore.InvalidArgument, match="timeout"):
        q.wait("d", timeout="soon")
