"""Replies in the background: the chapter's scenario, end to end, with real processes.

    python examples/replies.py [NEW-STORE-FILE]

It uses a temporary store file unless given one (which must not exist yet).

1. A chat message arrives. It is inserted into the application's ``messages``
   table and, in the same transaction, the job ``reply:41`` is added to answer
   it: both commit, or neither (JOB-02).
2. Worker 1, a separate process, claims the job and asks a slow stand-in for a
   model. ``run.step`` keeps the answer under the job before it returns.
3. Worker 1 is killed with SIGKILL before it wrote the reply.
4. Worker 2 opens the store, which ends the dead worker's lease at once
   (DUR-03), and claims the job for attempt 2. Its step returns the kept
   answer without asking the model again (JOB-06).
5. The reply is inserted with ``run.transaction``: the insert and the step's
   checkpoint commit together, so it happens exactly once (JOB-14).

The program prints a timeline, checks that the model was asked once and that
one reply exists, and exits with 0 when that is so.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Optional

import tinystore

KEPT = "the step's answer is kept under the job"
ASKING = "asking the model"


# The application: what runs in a worker


class Model:
    """A slow stand-in for a language model."""

    def __init__(self) -> None:
        self.calls = 0

    async def answer(self, message_id: int) -> str:
        self.calls += 1
        tell(f"{ASKING} about message {message_id} (it takes a while)...")
        await asyncio.sleep(0.5)
        return "Yes, we are open on Sunday from 10:00 to 16:00."


def tell(text: str) -> None:
    """A worker's line of the timeline: the parent process reads it and prints it with the time."""
    print(text, flush=True)


def insert_reply(tx: tinystore.Transaction, message_id: int, text: str) -> int:
    # No unique key on reply_to is needed: run.transaction alone makes this insert happen once.
    tx.execute("INSERT INTO messages (body, reply_to) VALUES (?, ?)", (text, message_id))
    return tx.query("SELECT last_insert_rowid()")[0][0]


def work(path: str, stall_after_step: bool) -> None:
    """A worker process: serve the queue until nothing is due (worker 1 never gets that far)."""
    store = tinystore.open(path)
    replies = store.queue("replies")
    model = Model()

    @replies.work
    async def answer(payload: dict, run: tinystore.AsyncRun) -> None:
        message_id = payload["message_id"]
        tell(f"claimed {run.id}, attempt {run.attempt}")
        asked_before = model.calls
        text = await run.step("answer", lambda: model.answer(message_id))
        if model.calls > asked_before:
            tell(f"{KEPT}: {text!r}")
        else:
            tell(f"step 'answer' came back from attempt 1's checkpoint, the model was not asked: {text!r}")
        if stall_after_step:
            tell("writing the reply... (the demo kills this worker now)")
            await asyncio.Event().wait()
        row = await run.transaction("reply", lambda tx: insert_reply(tx, message_id, text))
        tell(f"reply inserted into messages as row {row}, in one commit with its checkpoint")

    store.run_until_idle()
    tell("nothing left to do; exiting")
    store.close()


# The demo: the application's side, and the two workers


class Timeline:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def say(self, who: str, text: str) -> None:
        print(f"{time.monotonic() - self.start:6.2f}s  {who:<9} {text}", flush=True)


def start_worker(path: str, name: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", path, name],
                            stdout=subprocess.PIPE, text=True, env=env)


def relay(timeline: Timeline, who: str, proc: subprocess.Popen, until: Optional[str] = None) -> list[str]:
    """Print the worker's lines on the timeline until one contains ``until`` (or the worker ends)."""
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        lines.append(line)
        timeline.say(who, line)
        if until is not None and until in line:
            break
    return lines


def scenario(path: str) -> bool:
    timeline = Timeline()
    say = timeline.say
    say("app", f"store: {path}")
    store = tinystore.open(path)
    store.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT NOT NULL, reply_to INTEGER)")
    replies = store.queue("replies")

    with store.transaction() as tx:
        tx.execute("INSERT INTO messages (id, body) VALUES (?, ?)", (41, "Are you open on Sunday?"))
        job = replies.add({"message_id": 41}, id="reply:41", tx=tx)
    say("app", f"message 41 inserted and {job.id} added in one transaction: {job.state}")

    worker1 = start_worker(path, "1")
    try:
        say("app", f"started worker 1 (pid {worker1.pid})")
        lines1 = relay(timeline, "worker 1", worker1, until="demo kills")
    finally:
        worker1.kill()
        worker1.wait()
    killed_after_step = any(KEPT in line for line in lines1) and worker1.returncode == -signal.SIGKILL
    say("app", "SIGKILL worker 1: it died after the step was kept, before it wrote the reply")
    state = replies.get("reply:41")
    say("app", f"reply:41 is {state.state}, attempt {state.attempt}: the dead worker's lease is still on it")

    worker2 = start_worker(path, "2")
    try:
        say("app", f"started worker 2 (pid {worker2.pid}); its open ends the dead worker's lease at once")
        lines2 = relay(timeline, "worker 2", worker2)
    finally:
        if worker2.poll() is None:
            worker2.kill()
        worker2.wait()

    asked = sum(ASKING in line for line in lines1 + lines2)
    rows = store.query("SELECT id, body, reply_to FROM messages ORDER BY id")
    reply_rows = [row for row in rows if row[2] == 41]
    done = replies.get("reply:41") is None
    store.close()
    say("app", f"reply:41 is {'done' if done else 'not done'}; messages now:")
    for row_id, body, reply_to in rows:
        say("app", f"  {row_id}  {body!r}" + (f"  (reply to {reply_to})" if reply_to else ""))
    say("app", f"the model was asked {times(asked)}; message 41 has {len(reply_rows)} "
               f"{'reply' if len(reply_rows) == 1 else 'replies'}")
    return killed_after_step and worker2.returncode == 0 and done and asked == 1 and len(reply_rows) == 1


def times(n: int) -> str:
    return {0: "no times", 1: "once", 2: "twice"}.get(n, f"{n} times")


def main(argv: list[str]) -> int:
    if argv[:1] == ["worker"]:
        work(argv[1], stall_after_step=argv[2] == "1")
        return 0
    if argv:
        if os.path.exists(argv[0]):
            print(f"{argv[0]} exists: give the name of a new store file", file=sys.stderr)
            return 2
        ok = scenario(argv[0])
    else:
        with tempfile.TemporaryDirectory() as folder:
            ok = scenario(os.path.join(folder, "replies.db"))
    print("as the chapter tells it: the model asked once, the reply written once" if ok
          else "NOT as the chapter tells it: see the timeline above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
