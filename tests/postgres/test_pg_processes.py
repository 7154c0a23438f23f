"""Several processes on one PostgreSQL store: limits across them, a killed worker's leases, cancels."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def _spawn(pg, env, *args):
    return subprocess.Popen(pg.child(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _read_line(child, want: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            if child.poll() is not None:
                raise AssertionError(f"the child ended: {child.stderr.read()}")
            continue
        if line.startswith(want):
            return line.strip()
    raise AssertionError(f"no {want!r} from the child within {timeout}s")


def _stop(child):
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def test_concurrency_holds_across_two_processes(pg, child_env, tmp_path, wait_for):
    witness = tmp_path / "witness.txt"
    witness.touch()
    store = pg.open()
    # Two processes of two handlers each could run four at once: the limit of three binds them both,
    # and neither can run three alone.
    q = store.queue("limited", concurrency=3)
    q.add_many([{"i": i} for i in range(16)])
    children = [_spawn(pg, child_env, "worker", "limited", str(witness), "3", "0.15", "2") for _ in range(2)]
    try:
        for child in children:
            _read_line(child, "serving")
        wait_for(lambda: witness.read_text().count("end ") == 16, timeout=60)
    finally:
        for child in children:
            _stop(child)
    running, most, pids = 0, 0, set()
    for line in witness.read_text().splitlines():
        kind, _, _, pid = line.split()
        running += 1 if kind == "start" else -1
        most = max(most, running)
        pids.add(pid)
    assert most <= 3, f"{most} handlers ran at once under concurrency=3"
    assert len(pids) == 2, "both processes ran jobs"
    assert pg.rows("SELECT count(*) FROM {s}.jobs") == [(0,)]


def test_a_killed_workers_leases_are_ended_by_a_live_process(pg, child_env, wait_for):
    store = pg.open()
    q = store.queue("held", lease="1h", attempts=5)
    q.add({"x": 1}, id="j")
    child = _spawn(pg, child_env, "hold", "held")
    try:
        _read_line(child, "running j")
        assert q.get("j").state == "running"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        ran = []

        @q.work
        def handler(payload, run):
            ran.append(run.attempt)
        store.start()
        try:
            # The lease has an hour to run: only the liveness timer (every 2 s) can end it (DUR-03).
            wait_for(lambda: ran, timeout=10)
        finally:
            store.stop()
        assert ran == [2]  # the killed attempt stays counted
        assert pg.rows("SELECT count(*) FROM {s}.processes WHERE pid = %s", (child.pid,)) == [(0,)]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_an_open_right_after_a_kill_ends_the_killed_processes_leases_as_its_grace_ends_without_serving(
        pg, child_env, wait_for):
    from tinystore.backends.postgres._keeper import BEAT, GRACE

    store = pg.open()
    q = store.queue("held", lease="1h")
    q.add({"x": 1}, id="j")
    child = _spawn(pg, child_env, "hold", "held")
    try:
        _read_line(child, "running j")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
        # At once, it cannot be told from a process whose sessions were ended and that connects again: the
        # open leaves it its lease, and looks again as its grace ends (DUR-03), though nothing serves.
        other = pg.open()
        assert other.queue("held").get("j").state == "running"
        wait_for(lambda: pg.rows("SELECT count(*) FROM {s}.leases") == [(0,)], timeout=GRACE + 10)
        assert time.monotonic() - killed > GRACE - BEAT - 1  # not before: its last heartbeat was some BEAT old
        job = other.queue("held").get("j")
        assert job.state == "waiting" and job.attempt == 1
        assert "lease ended" in job.error
        assert pg.rows("SELECT count(*) FROM {s}.processes WHERE pid = %s", (child.pid,)) == [(0,)]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_cancel_from_another_process_reaches_the_running_handler(pg, child_env):
    store = pg.open()
    q = store.queue("c")
    q.add({}, id="j")
    child = _spawn(pg, child_env, "cancellable", "c")
    try:
        _read_line(child, "running j")
        began = time.monotonic()
        assert q.cancel("j")
        _read_line(child, "cancelled j", timeout=10)
        assert time.monotonic() - began < 5
        assert q.get("j") is None
    finally:
        _stop(child)


def test_notices_wake_a_worker_in_another_process_at_once(pg, child_env, tmp_path, wait_for):
    witness = tmp_path / "witness.txt"
    witness.touch()
    store = pg.open()
    store.queue("fast", concurrency=4)
    child = _spawn(pg, child_env, "worker", "fast", str(witness), "4", "0", "4")
    try:
        _read_line(child, "serving")
        time.sleep(0.3)
        began = time.time()
        store.queue("fast").add({}, id="now")
        wait_for(lambda: "end now" in witness.read_text(), timeout=10)
        started = float(witness.read_text().split()[2])
        assert started - began < 1.0
    finally:
        _stop(child)
