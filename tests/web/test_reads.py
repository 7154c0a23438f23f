"""The reads the dashboard added to the public API, on each backend: ``store.minute_counts``,
``queue.usage`` and ``store.on_change``."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest

import kits
import tinystore
from tinystore.testing import FakeClock

START = 1_800_000_000.0  # a whole minute
WAIT = 20


@pytest.fixture(params=list(kits.KITS))
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kit = kits.KITS[request.param](tmp_path)
    yield kit.new_target("reads")
    kit.cleanup()


def test_minute_counts_are_each_minutes_runs_done_and_failed_oldest_first(target: str) -> None:
    clock = FakeClock(START)
    with tinystore.open(target, clock=clock) as store:
        queue = store.queue("q", attempts=1)
        queue.work(lambda payload, run: 1 / payload["d"])
        queue.add_many([{"d": 1}, {"d": 0}, {"d": 1}])
        store.run_until_idle()
        clock.advance("2m")
        queue.add({"d": 0})
        store.run_until_idle()
        minute = datetime.fromtimestamp(START, timezone.utc)
        assert store.minute_counts(60) == {"q": [
            {"minute": minute, "started": 3, "done": 2, "failed": 1},
            {"minute": minute + timedelta(minutes=2), "started": 1, "done": 0, "failed": 1},
        ]}
        assert store.minute_counts(1) == {"q": [{"minute": minute + timedelta(minutes=2),
                                                "started": 1, "done": 0, "failed": 1}]}
        for bad in (0, 1441, "60", True):
            with pytest.raises(tinystore.InvalidArgument, match="minutes="):
                store.minute_counts(bad)


def test_usage_counts_the_rate_windows_starts_and_the_busiest_groups(target: str) -> None:
    gate, started = threading.Event(), threading.Semaphore(0)
    with tinystore.open(target) as store:
        limited = store.queue("limited", rate="100/h", group_concurrency=2)
        free = store.queue("free")

        @limited.work
        def hold(payload: Any, run: tinystore.Run) -> None:
            started.release()
            gate.wait(WAIT)

        limited.add_many([tinystore.Job({}, group=g) for g in ("a", "b", "b", "c", "c")])
        store.start()
        try:
            for _ in range(5):
                assert started.acquire(timeout=WAIT)
            assert limited.usage(groups=2) == {"rate_used": 5, "busiest_groups": [
                {"group": "b", "running": 2}, {"group": "c", "running": 2}]}
            assert limited.usage()["busiest_groups"][-1] == {"group": "a", "running": 1}
        finally:
            gate.set()
            store.stop()
        assert free.usage() == {"rate_used": None, "busiest_groups": []}
        with pytest.raises(tinystore.InvalidArgument, match="groups=0"):
            free.usage(groups=0)


def test_on_change_tells_of_a_commit_that_gives_work_until_stopped(target: str) -> None:
    with tinystore.open(target) as store, tinystore.open(target) as other:
        told = threading.Event()
        stop = store.on_change(told.set)
        other.queue("q").add({})  # another process's commit, as far as the store can tell
        assert told.wait(WAIT)
        stop()
        told.clear()
        store.queue("q").add({})
        assert not told.is_set()  # told at once, in this thread, where it still listened
        with pytest.raises(tinystore.InvalidArgument, match="callable"):
            store.on_change("not a function")
