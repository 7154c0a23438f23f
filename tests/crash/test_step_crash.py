"""JOB-06 across a crash: a worker SIGKILLed after a step's answer was kept, or before.

Killed after: the next attempt gets the kept answer back, fn ran once in all
(a witness file outside the store counts its calls), and the rest of the
handler runs. Killed while fn ran: nothing was kept, so the step runs again.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, Callable

import pytest

import tinystore
from helpers import start_child, wait_for_line

WAIT = 30

KILLED_AFTER_THE_STEP = """
import asyncio, os, sys, threading
import tinystore

target, witness, kind, moment = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

def note(what):
    with open(witness, "a") as f:
        f.write(what + "\\n")

def model(message_id):
    note("model")
    if moment == "in fn":
        print("in fn", flush=True)
        threading.Event().wait()  # killed here, before the answer was kept
    return {"reply_to": message_id, "text": "answered by pid %d" % os.getpid()}

store = tinystore.open(target)
replies = store.queue("replies")

if kind == "def":
    @replies.work
    def answer(payload, run):
        kept = run.step("answer", lambda: model(payload["message_id"]))
        print("kept", kept["text"], flush=True)
        threading.Event().wait()  # killed here, before the rest of the handler
else:
    @replies.work
    async def answer(payload, run):
        kept = await run.step("answer", lambda: model(payload["message_id"]))
        print("kept", kept["text"], flush=True)
        await asyncio.Event().wait()  # killed here, before the rest of the handler

store.run_until_idle()
"""


def witnessed(witness: str) -> list[str]:
    return Path(witness).read_text().split() if os.path.exists(witness) else []


@pytest.mark.parametrize("kind", ["def", "async def"])
def test_JOB_06_a_worker_killed_after_a_step_was_kept_hands_the_answer_to_the_next_attempt_and_fn_ran_once(
        open_store: Callable[..., tinystore.Store], target: str, tmp_path: Path,
        child_env: dict[str, str], kind: str) -> None:
    witness = str(tmp_path / "witness")
    first = open_store()
    first.queue("replies").add({"message_id": 41}, id="reply:41")
    first.close()

    child = start_child(KILLED_AFTER_THE_STEP, target, witness, kind.split()[0], "after the step",
                        env=child_env)
    try:
        line = wait_for_line(child, "kept")
    finally:
        child.kill()
        child.wait(WAIT)
    assert child.returncode == -signal.SIGKILL
    assert line == f"kept answered by pid {child.pid}"
    assert witnessed(witness) == ["model"]

    store = open_store()  # the next open ends the dead worker's lease at once (DUR-03)
    replies = store.queue("replies")
    assert (replies.get("reply:41").state, replies.get("reply:41").attempt) == ("waiting", 1)
    seen: list[tuple[int, Any]] = []

    def model_again() -> dict:
        with open(witness, "a") as f:
            f.write("model\n")
        return {"reply_to": 41, "text": "answered again"}

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        kept = run.step("answer", model_again)
        with open(witness, "a") as f:
            f.write("rest\n")
        seen.append((run.attempt, kept))

    store.run_until_idle()
    assert seen == [(2, {"reply_to": 41, "text": f"answered by pid {child.pid}"})]
    assert witnessed(witness) == ["model", "rest"]  # fn ran once in all; the rest of the handler ran
    assert replies.get("reply:41") is None  # done


def test_JOB_06_a_worker_killed_while_fn_ran_kept_nothing_and_the_next_attempt_runs_the_step_again(
        open_store: Callable[..., tinystore.Store], target: str, tmp_path: Path,
        child_env: dict[str, str]) -> None:
    witness = str(tmp_path / "witness")
    first = open_store()
    first.queue("replies").add({"message_id": 41}, id="reply:41")
    first.close()

    child = start_child(KILLED_AFTER_THE_STEP, target, witness, "def", "in fn", env=child_env)
    try:
        wait_for_line(child, "in fn")
    finally:
        child.kill()
        child.wait(WAIT)

    store = open_store()
    replies = store.queue("replies")
    seen: list[tuple[int, Any]] = []

    def model_again() -> dict:
        with open(witness, "a") as f:
            f.write("model\n")
        return {"reply_to": 41, "text": "answered by the next attempt"}

    @replies.work
    def answer(payload: Any, run: tinystore.Run) -> None:
        seen.append((run.attempt, run.step("answer", model_again)))

    store.run_until_idle()
    assert seen == [(2, {"reply_to": 41, "text": "answered by the next attempt"})]
    assert witnessed(witness) == ["model", "model"]
    assert replies.get("reply:41") is None
