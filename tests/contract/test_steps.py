"""JOB-06: ``run.step(name, fn)`` keeps fn's answer under the job.

A later attempt gets the kept answer back without calling fn; only what is
left runs. A step whose attempt ended before its answer was kept runs again.
Steps are dropped when the job leaves the queue.

Every test counts the calls of fn with a witness, on a real store and a
fake clock: time moves by hand, nothing sleeps.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

import pytest

import kits
import tinystore
from tinystore.testing import FakeClock

WAIT = 30  # seconds an event may take before the test fails instead of hanging (a loaded CI machine)


def serve_in_thread(store: tinystore.Store) -> threading.Thread:
    """run_until_idle on a thread of its own, so that the test can move the clock while a handler stalls."""
    thread = threading.Thread(target=store.run_until_idle, name="test-worker", daemon=True)
    thread.start()
    return thread


def stalled_worker(open_store: Callable[..., tinystore.Store]) -> tinystore.Store:
    """A second open of the store whose clock stands still, as a stopped process's would.

    Its renewals and timers never come due, so the lease of what it claims runs
    out once the test moves the other store's clock past it, while its handler
    (a ``def`` handler, so that nothing cancels it) still runs.
    """
    return open_store(clock=FakeClock())


def join(thread: threading.Thread) -> None:
    thread.join(WAIT)
    assert not thread.is_alive(), "the worker never became idle"


# A later attempt gets the kept answer back without calling fn


def test_JOB_06_a_step_kept_before_the_handler_raised_is_returned_to_the_next_attempt_without_calling_fn(
        store: tinystore.Store, clock: FakeClock) -> None:
    replies = store.queue("replies")
    calls: list[int] = []
    seen: list[tuple[int, Any, str]] = []

    def model(attempt: int) -> dict:
        calls.append(attempt)
        return {"text": f"answered in attempt {attempt}"}

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        kept = run.step("answer", lambda: model(run.attempt))
        rest = run.step("rest", lambda: f"rest in attempt {run.attempt}")
        seen.append((run.attempt, kept, rest))
        if run.attempt == 1:
            raise RuntimeError("the handler failed after its steps")

    replies.add({"message_id": 41}, id="reply:41")
    store.run_until_idle()
    assert replies.get("reply:41").state == "scheduled"  # backoff after the raise
    clock.advance("2s")
    store.run_until_idle()

    assert calls == [1]
    assert seen == [(1, {"text": "answered in attempt 1"}, "rest in attempt 1"),
                    (2, {"text": "answered in attempt 1"}, "rest in attempt 1")]
    assert replies.get("reply:41") is None  # done


def test_JOB_06_a_step_kept_before_run_retry_is_returned_to_the_retried_attempt(
        store: tinystore.Store, clock: FakeClock) -> None:
    replies = store.queue("replies")
    calls: list[int] = []
    seen: list[tuple[int, Any]] = []

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> Any:
        kept = run.step("answer", lambda: calls.append(run.attempt) or [run.attempt, "kept"])
        seen.append((run.attempt, kept))
        if run.attempt == 1:
            return run.retry("10s")
        return None

    replies.add({"message_id": 41}, id="reply:41")
    store.run_until_idle()
    clock.advance("10s")
    store.run_until_idle()

    assert calls == [1]
    assert seen == [(1, [1, "kept"]), (2, [1, "kept"])]
    assert replies.get("reply:41") is None


def test_JOB_06_a_step_kept_by_an_attempt_that_lost_its_lease_is_returned_to_the_attempt_that_took_over(
        store: tinystore.Store, open_store: Callable[..., tinystore.Store], clock: FakeClock) -> None:
    stalled = stalled_worker(open_store)
    calls: list[int] = []
    seen: dict[int, Any] = {}
    kept_by_first, first_may_go = threading.Event(), threading.Event()

    def answer(payload: Any, run: tinystore.Run) -> None:
        seen[run.attempt] = run.step("answer", lambda: calls.append(run.attempt) or f"by attempt {run.attempt}")
        if run.attempt == 1:
            kept_by_first.set()
            assert first_may_go.wait(WAIT)

    replies = store.queue("replies", lease="30s")
    replies.work(answer)
    stalled.queue("replies").work(answer)
    replies.add({"message_id": 41}, id="reply:41")
    first = serve_in_thread(stalled)
    assert kept_by_first.wait(WAIT)
    clock.advance("31s")  # past the lease that nothing renewed
    store.run_until_idle()  # ends the lease that ran out and runs attempt 2
    first_may_go.set()
    join(first)

    assert calls == [1]
    assert seen == {1: "by attempt 1", 2: "by attempt 1"}
    assert replies.get("reply:41") is None


def test_JOB_06_an_async_handler_steps_accept_sync_and_async_fn_and_get_both_answers_back(
        store: tinystore.Store, clock: FakeClock) -> None:
    replies = store.queue("replies")
    calls: list[str] = []
    seen: list[tuple[int, Any, Any]] = []

    async def slow_model(message_id: int) -> dict:
        calls.append("async")
        await asyncio.sleep(0)
        return {"reply_to": message_id, "text": "hello"}

    @replies.work
    async def answer(payload: Any, run: tinystore.AsyncRun) -> None:
        assert isinstance(run, tinystore.AsyncRun)
        looked_up = await run.step("lookup", lambda: calls.append("sync") or {"user": "ada"})
        text = await run.step("answer", lambda: slow_model(payload["message_id"]))
        seen.append((run.attempt, looked_up, text))
        if run.attempt == 1:
            raise RuntimeError("the handler failed after its steps")

    replies.add({"message_id": 41}, id="reply:41")
    store.run_until_idle()
    clock.advance("2s")
    store.run_until_idle()

    assert calls == ["sync", "async"]
    assert seen == [(1, {"user": "ada"}, {"reply_to": 41, "text": "hello"}),
                    (2, {"user": "ada"}, {"reply_to": 41, "text": "hello"})]
    assert replies.get("reply:41") is None


def test_JOB_06_falsy_answers_none_zero_empty_are_kept_like_any_other(
        store: tinystore.Store, clock: FakeClock) -> None:
    replies = store.queue("replies")
    answers: list[Any] = [None, 0, False, "", [], {}]
    calls: list[tuple[int, int]] = []
    seen: list[list[Any]] = []

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        seen.append([run.step(f"value:{i}", lambda i=i: calls.append((run.attempt, i)) or answers[i])
                     for i in range(len(answers))])
        if run.attempt == 1:
            raise RuntimeError("once more")

    replies.add({}, id="reply:41")
    store.run_until_idle()
    clock.advance("2s")
    store.run_until_idle()
    assert calls == [(1, i) for i in range(len(answers))]
    assert seen == [answers, answers]


# Names


def test_JOB_06_calling_the_same_step_name_twice_in_one_run_is_an_error_that_says_so(
        store: tinystore.Store) -> None:
    replies = store.queue("replies")
    raised: list[BaseException] = []

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        run.step("model", lambda: "first")
        try:
            run.step("model", lambda: "second")
        except Exception as exc:
            raised.append(exc)
            raise

    replies.add({}, id="reply:41")
    store.run_until_idle()

    assert len(raised) == 1 and isinstance(raised[0], tinystore.InvalidArgument)
    message = str(raised[0])
    assert "'model'" in message and "already" in message and "model:1" in message
    job = replies.get("reply:41")
    assert job.state == "scheduled" and job.attempt == 1  # the attempt failed like an exception
    assert "already" in job.error


def test_JOB_06_numbered_step_names_in_a_loop_are_separate_steps_each_kept(
        store: tinystore.Store, clock: FakeClock) -> None:
    replies = store.queue("replies")
    calls: list[tuple[int, int]] = []
    seen: list[list[str]] = []

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        drafts = [run.step(f"model:{i}", lambda i=i: calls.append((run.attempt, i)) or f"draft {i}")
                  for i in (1, 2, 3)]
        seen.append(drafts)
        if run.attempt == 1:
            raise RuntimeError("once more")

    replies.add({}, id="reply:41")
    store.run_until_idle()
    clock.advance("2s")
    store.run_until_idle()

    assert calls == [(1, 1), (1, 2), (1, 3)]
    assert seen == [["draft 1", "draft 2", "draft 3"]] * 2


# Answers that cannot be kept, and fn that raises


@pytest.mark.parametrize("bad, says, error_type", [
    (lambda: object(), "not JSON", tinystore.InvalidArgument),
    (lambda: {"values": float("nan")}, "not JSON", tinystore.InvalidArgument),
    (lambda: "x" * (1024 * 1024), "over the limit", tinystore.LimitExceeded),
], ids=["an object", "NaN", "over 1 MiB"])
def test_JOB_06_an_answer_that_is_not_json_or_over_1_MiB_is_refused_and_the_attempt_fails_like_an_exception(
        store: tinystore.Store, clock: FakeClock, bad: Any, says: str, error_type: type) -> None:
    replies = store.queue("replies")
    calls: list[int] = []
    raised: list[BaseException] = []

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        def fn() -> Any:
            calls.append(run.attempt)
            return bad()
        try:
            run.step("answer", fn)
        except Exception as exc:
            raised.append(exc)
            raise

    replies.add({}, id="reply:41")
    store.run_until_idle()

    assert len(raised) == 1 and isinstance(raised[0], error_type)
    assert says in str(raised[0]) and "'answer'" in str(raised[0]) and "reply:41" in str(raised[0])
    job = replies.get("reply:41")
    assert (job.state, job.attempt) == ("scheduled", 1)
    assert error_type.__name__ in job.error and says in job.error

    clock.advance("2s")
    store.run_until_idle()
    assert calls == [1, 2]  # nothing was kept: the next attempt calls fn again


def test_JOB_06_an_exception_raised_by_fn_is_not_kept_and_the_step_runs_again_next_attempt(
        store: tinystore.Store, clock: FakeClock) -> None:
    replies = store.queue("replies")
    calls: list[int] = []
    seen: list[tuple[int, Any]] = []

    def model(attempt: int) -> str:
        calls.append(attempt)
        if attempt == 1:
            raise ConnectionError("the model is down")
        return f"answered in attempt {attempt}"

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        seen.append((run.attempt, run.step("answer", lambda: model(run.attempt))))
        if run.attempt == 2:
            raise RuntimeError("after the step")

    replies.add({}, id="reply:41")
    store.run_until_idle()
    assert "ConnectionError: the model is down" in replies.get("reply:41").error
    clock.advance("2s")
    store.run_until_idle()
    clock.advance("3s")
    store.run_until_idle()

    assert calls == [1, 2]  # called again after the exception, not after the kept answer
    assert seen == [(2, "answered in attempt 2"), (3, "answered in attempt 2")]


# Steps leave with their job


@pytest.mark.parametrize("leaves", ["done", "done past dedupe", "failed past keep", "cancelled"])
def test_JOB_06_steps_are_removed_from_the_file_when_their_job_leaves_the_queue(
        store: tinystore.Store, clock: FakeClock, kit: kits.Kit, target: str, leaves: str) -> None:
    marker = f"kept-answer-{leaves.replace(' ', '-')}"
    replies = store.queue("replies", dedupe="1h" if leaves == "done past dedupe" else 0, keep="1h")
    in_store_while_running: list[bool] = []

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> Any:
        run.step("answer", lambda: {"text": marker})
        in_store_while_running.append(kit.holds(target, marker))  # kept before step returned
        if leaves.startswith("done"):
            return None
        if leaves == "failed past keep":
            return run.fail("no reply for this one")
        raise RuntimeError("runs again later")

    replies.add({"message_id": 41}, id="reply:41")
    store.run_until_idle()
    assert in_store_while_running == [True]

    if leaves in ("failed past keep", "cancelled"):
        assert kit.holds(target, marker), "the steps of a job the queue keeps must stay"
    if leaves == "cancelled":
        assert replies.cancel("reply:41")
    elif leaves != "done":
        clock.advance("2h")
        store.maintain()
    assert replies.get("reply:41") is None
    assert not kit.holds(target, marker)


def test_JOB_06_a_done_job_added_again_with_the_same_id_starts_with_no_steps(
        store: tinystore.Store) -> None:
    replies = store.queue("replies")
    calls: list[str] = []

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        run.step("answer", lambda: calls.append(payload["text"]) or payload["text"])

    replies.add({"text": "first"}, id="reply:41")
    store.run_until_idle()
    replies.add({"text": "second"}, id="reply:41")
    store.run_until_idle()
    assert calls == ["first", "second"]


# A late attempt writes nothing


def test_JOB_06_a_late_attempt_cannot_overwrite_a_step_kept_by_the_attempt_that_now_holds_the_job(
        store: tinystore.Store, open_store: Callable[..., tinystore.Store], clock: FakeClock) -> None:
    stalled = stalled_worker(open_store)
    calls: list[int] = []
    seen: dict[int, Any] = {}
    late: list[BaseException] = []
    first_in_fn, first_may_go, first_ended = threading.Event(), threading.Event(), threading.Event()
    second_kept, second_may_go = threading.Event(), threading.Event()

    def model(attempt: int) -> str:
        calls.append(attempt)
        if attempt == 1:
            first_in_fn.set()
            assert first_may_go.wait(WAIT)  # meanwhile its lease runs out and attempt 2 keeps the step
        return f"by attempt {attempt}"

    def answer(payload: Any, run: tinystore.Run) -> None:
        try:
            seen[run.attempt] = run.step("answer", lambda: model(run.attempt))
        except tinystore.Conflict as exc:
            late.append(exc)
            raise
        finally:
            if run.attempt == 1:
                first_ended.set()
        if run.attempt == 2:
            second_kept.set()
            assert second_may_go.wait(WAIT)  # attempt 2 holds the job while attempt 1 tries to keep its answer
            raise RuntimeError("attempt 2 fails after its step, so that attempt 3 reads what is kept")

    replies = store.queue("replies", lease="30s")
    replies.work(answer)
    stalled.queue("replies").work(answer)
    replies.add({"message_id": 41}, id="reply:41")
    first = serve_in_thread(stalled)
    assert first_in_fn.wait(WAIT)
    clock.advance("31s")
    second = serve_in_thread(store)
    assert second_kept.wait(WAIT), "the second worker did not take the job over after its lease ran out"
    first_may_go.set()
    assert first_ended.wait(WAIT)
    second_may_go.set()
    join(first)
    join(second)

    assert len(late) == 1 and isinstance(late[0], tinystore.Conflict)
    assert "'answer'" in str(late[0]) and "attempt 1" in str(late[0]) and "reply:41" in str(late[0])
    assert seen == {2: "by attempt 2"}

    clock.advance("5s")
    store.run_until_idle()
    assert seen == {2: "by attempt 2", 3: "by attempt 2"}  # attempt 2's answer stayed
    assert calls == [1, 2]
    assert replies.get("reply:41") is None


def test_async_steps_let_other_handlers_run_between_them(store: tinystore.Store) -> None:
    # A step's write often runs at once on the loop's own thread; the handler must still yield there,
    # or a handler doing many steps would hold the loop: other handlers, timeouts and renewals wait.
    q = store.queue("steps")
    order: list[str] = []

    @q.work
    async def handle(payload: Any, run: tinystore.AsyncRun) -> None:
        for i in range(5):
            await run.step(f"s{i}", lambda: None)
            order.append(payload)

    q.add_many(["a", "b"])
    store.run_until_idle()
    assert sorted(order) == ["a"] * 5 + ["b"] * 5
    assert order != sorted(order)  # interleaved: neither kept the loop for all its steps
