"""A serving worker's line per queue, now and then: counts and run times instead of a line per done job."""

from __future__ import annotations

import logging
import threading

import tinystore
from tinystore.testing import FakeClock

WAIT = 30.0


class Heard(logging.Handler):
    """The tinystore records an in-process worker writes at info and above; ``wait_for`` one containing a text."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []
        self.cv = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self.cv:
            self.messages.append(record.getMessage())
            self.cv.notify_all()

    def wait_for(self, text: str) -> str:
        with self.cv:
            assert self.cv.wait_for(lambda: any(text in m for m in self.messages), WAIT), self.messages
            return next(m for m in self.messages if text in m)


def test_a_serving_worker_writes_a_line_a_minute_per_queue_whose_attempts_ended_with_counts_and_run_times(
        store: tinystore.Store, clock: FakeClock) -> None:
    q = store.queue("tick", dedupe="1h")
    idle = store.queue("idle")

    @q.work
    def handler(payload: str, run: tinystore.Run) -> object:
        clock.advance("2s") if payload == "slow" else None
        return run.snooze("1h") if payload == "later" else None

    idle.work(lambda payload, run: None)
    heard = Heard()
    logger = logging.getLogger("tinystore")
    logger.addHandler(heard)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        store.start(workers=1)  # one handler at a time: each run time is its own
        q.add_many([tinystore.Job("fast", id="a"), tinystore.Job("slow", id="b"), tinystore.Job("later", id="c")])
        assert q.wait("a", timeout=WAIT).state == "done" and q.wait("b", timeout=WAIT).state == "done"
        for state in q.watch("c"):
            if state.state == "scheduled":
                break
        clock.advance("60s")
        line = heard.wait_for("queue tick:")
        assert line.startswith("queue tick: 3 attempts ended in the last 6"), line
        assert "(2 done, 1 snoozed); handlers ran 0.667s on average, 2.000s at most; 0 running now" in line, line
        assert not [m for m in heard.messages if m.startswith("queue idle") or " done in " in m], heard.messages
    finally:
        store.stop()
        logger.removeHandler(heard)
        logger.setLevel(level)
    assert len([m for m in heard.messages if m.startswith("queue tick:")]) == 1  # nothing ended since
