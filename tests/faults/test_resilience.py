"""A worker rides out a store it cannot write for a while, and stops, saying why, when it cannot go on.

Real worker processes (``tinystore worker``) on a store in a small tmpfs of
the test's own, which the test fills with a file and frees again: the disk
is really full, for every process. Tests run as root to mount it; where
mounting is not permitted they are skipped, except under CI=true, where that
fails them.
"""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

import tinystore

WORKER = [sys.executable, "-m", "tinystore.cli", "worker", "app:store"]


class Disk:
    """A tmpfs of the test's own: ``fill()`` leaves no byte free, ``free()`` gives the space back."""

    def __init__(self, root: Path):
        self.root = root
        self._filler = root / "filler"

    def fill(self) -> None:
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (1 << 20, 1 << 16, 4096, 512, 1):
                block = b"\0" * size
                try:
                    while True:
                        os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        finally:
            os.close(fd)

    def free(self) -> None:
        os.remove(self._filler)


def mounted_disk(where: Path, size: str = "16M") -> Iterator[Disk]:
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                              capture_output=True, text=True)
        why = done.stderr.strip() or f"exit {done.returncode}"
    except OSError as exc:
        done, why = None, str(exc)
    if done is None or done.returncode != 0:
        message = f"cannot mount a tmpfs to fill ({why}): these tests need root"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield Disk(where)
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    yield from mounted_disk(tmp_path / "disk")


_stderr: dict[int, list[str]] = {}
_readers: dict[int, threading.Thread] = {}


def stderr_of(proc: subprocess.Popen) -> str:
    """What a worker logged so far, line by line as it logs (read by a thread of its own)."""
    return "".join(_stderr.get(proc.pid, []))


def _read_stderr(proc: subprocess.Popen) -> None:
    lines = _stderr.setdefault(proc.pid, [])
    assert proc.stderr is not None
    for line in iter(proc.stderr.readline, ""):
        lines.append(line)


def wait_child(proc: subprocess.Popen, timeout: float = 30) -> int:
    """Wait until the worker ends by itself; its exit status, once all it logged is read."""
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the worker did not end within {timeout:g}s; it logged:\n{stderr_of(proc)}") from None
    _readers[proc.pid].join(10)
    return code


class Workers:
    """``tinystore worker app:store`` processes, with the test's ``app.py`` and store."""

    def __init__(self, folder: Path, store: Path, app: str, env: dict[str, str]):
        self.folder = folder
        self.store = store
        self.env = env
        self.witness = folder / "witness.txt"
        (folder / "app.py").write_text(textwrap.dedent(app))
        self.procs: list[subprocess.Popen] = []

    def start(self, *args: str) -> subprocess.Popen:
        env = dict(os.environ, STORE=str(self.store), WITNESS=str(self.witness), PYTHONUNBUFFERED="1", **self.env)
        proc = subprocess.Popen([*WORKER, *args], cwd=self.folder, env=env, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        reader = _readers[proc.pid] = threading.Thread(target=_read_stderr, args=(proc,), daemon=True)
        reader.start()
        self.procs.append(proc)
        wait_until(lambda: "started on" in stderr_of(proc) or proc.poll() is not None, 30, "the worker to start")
        assert proc.poll() is None, stderr_of(proc)
        return proc

    def witnessed(self) -> list[list[str]]:
        if not self.witness.exists():
            return []
        return [line.split() for line in self.witness.read_text().splitlines()]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., Workers]]:
    made: list[Workers] = []

    def make(store: Path, app: str, **env: str) -> Workers:
        made.append(Workers(tmp_path, store, app, env))
        return made[-1]

    yield make
    for w in made:
        w.stop()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g}s for {what}")
        time.sleep(0.02)


def read(store: Path, sql: str) -> list[tuple]:
    """Read the store as any process could, without tinystore (a full disk does not stop reads)."""
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def jobs_left(store: Path) -> int:
    return read(store, "SELECT count(*) FROM tinystore_jobs")[0][0]


DRAIN = '''
    import asyncio, os
    import tinystore

    store = tinystore.open(os.environ["STORE"])
    drain = store.queue("drain")

    @drain.work
    async def handle(payload, run):
        await asyncio.sleep(0.005)
'''


def test_a_worker_that_finds_the_disk_full_for_3s_logs_it_once_and_drains_every_job_once_space_is_freed(
        disk: Disk, workers: Callable[..., Workers]) -> None:
    store = disk.root / "store.db"
    with tinystore.open(store) as s:  # closed: the worker's log of writes starts from nothing
        s.queue("drain").add_many(range(2000))
    w = workers(store, DRAIN)
    worker = w.start("--workers", "4")
    wait_until(lambda: jobs_left(store) < 1950, 30, "the worker to begin draining")

    disk.fill()
    full_at = time.monotonic()
    wait_until(lambda: "no space is left" in stderr_of(worker), 10, "a write to fail for want of space")
    time.sleep(max(0.0, full_at + 3 - time.monotonic()))
    stuck = jobs_left(store)
    disk.free()

    wait_until(lambda: jobs_left(store) == 0 or worker.poll() is not None, 60, "the worker to drain the rest")
    assert worker.poll() is None, stderr_of(worker)
    assert stuck > 0
    err = stderr_of(worker)
    assert err.count("tinystore tries it again") == 1, err  # once per outage ...
    assert err.count("the store works again after") == 1, err  # ... and once on recovery
    worker.send_signal(signal.SIGTERM)
    assert wait_child(worker) == 0, stderr_of(worker)


LONG = '''
    import os, time
    import tinystore

    store = tinystore.open(os.environ["STORE"])
    long = store.queue("long", lease=os.environ.get("LEASE", "4s"), timeout=None, backoff=("100ms", "100ms"))

    def witness(*words):
        with open(os.environ["WITNESS"], "a") as f:
            f.write(" ".join(map(str, words)) + "\\n")

    @long.work
    def handle(payload, run):
        witness("start", os.getpid(), run.attempt, time.time())
        deadline = time.monotonic() + (payload["seconds"] if run.attempt == 1 else 0)
        while time.monotonic() < deadline and not run.cancelled:
            time.sleep(0.02)
        witness("end", os.getpid(), run.attempt, time.time(), run.cancelled)
'''


def lease_expiry(store: Path) -> float:
    rows = read(store, "SELECT expires FROM tinystore_leases")
    return rows[0][0] if rows else 0.0


def test_lease_renewals_ride_out_a_full_disk_so_no_other_worker_takes_the_job_while_it_runs(
        disk: Disk, workers: Callable[..., Workers]) -> None:
    store = disk.root / "store.db"
    tinystore.open(store).close()
    w = workers(store, LONG)
    w.start()
    w.start()
    with tinystore.open(store) as s:
        s.queue("long").add({"seconds": 7}, id="long-1")
    wait_until(lambda: w.witnessed(), 30, "a worker to start the job")
    first = lease_expiry(store)
    wait_until(lambda: lease_expiry(store) > first, 10, "a renewal of its lease")
    renewed_at = lease_expiry(store) - 4  # renewed every 2 s: the next one is due 2 s after this
    time.sleep(max(0.0, renewed_at + 1.3 - time.time()))
    disk.fill()
    time.sleep(1.5)
    disk.free()

    wait_until(lambda: any(line[0] == "end" for line in w.witnessed()), 30, "the job to end")
    time.sleep(0.5)
    runs = w.witnessed()
    assert [line[0] for line in runs] == ["start", "end"], runs  # one run, by one worker
    assert runs[1][4] == "False", runs  # never told to stop: its lease held throughout
    with tinystore.open(store) as s:
        assert s.queue("long").get("long-1") is None  # done


def test_a_renewal_that_fails_until_the_lease_would_run_out_tells_the_handler_to_stop_and_the_job_runs_again(
        disk: Disk, workers: Callable[..., Workers]) -> None:
    store = disk.root / "store.db"
    tinystore.open(store).close()
    w = workers(store, LONG, LEASE="2s")
    worker = w.start()
    with tinystore.open(store) as s:
        s.queue("long").add({"seconds": 8}, id="long-1")
    wait_until(lambda: w.witnessed(), 30, "the worker to start the job")
    first = lease_expiry(store)
    wait_until(lambda: lease_expiry(store) > first, 10, "a renewal of its lease")
    last_written = lease_expiry(store)
    disk.fill()  # no renewal can be written before that lease runs out
    wait_until(lambda: len(w.witnessed()) >= 2, 6, "the handler to be told to stop")
    told = w.witnessed()[1]
    time.sleep(max(0.0, last_written + 1 - time.time()))
    disk.free()

    assert told[:3] == ["end", str(worker.pid), "1"] and told[4] == "True", told
    assert float(told[3]) <= last_written + 0.2  # told before, or as, its lease ran out
    wait_until(lambda: len(w.witnessed()) >= 4, 30, "the job's next attempt")
    assert [line[:3] for line in w.witnessed()[2:]] == [["start", str(worker.pid), "2"],
                                                         ["end", str(worker.pid), "2"]]
    assert "its lease could not be renewed" in stderr_of(worker)


BOUNDED = '''
    import os
    import tinystore
    import tinystore._outage

    tinystore._outage.OUTAGE_LIMIT = 1.0  # 5 minutes unless a test says otherwise
    store = tinystore.open(os.environ["STORE"])
    soon = store.queue("soon")

    @soon.work
    def handle(payload, run):
        pass
'''


def test_a_worker_that_cannot_write_for_longer_than_it_retries_stops_and_exits_1_saying_why(
        disk: Disk, workers: Callable[..., Workers]) -> None:
    store = disk.root / "store.db"
    with tinystore.open(store) as s:
        s.queue("soon").add_many([tinystore.Job(n, delay="4s") for n in range(200)])
    w = workers(store, BOUNDED)
    worker = w.start()
    disk.fill()  # before those jobs are due: claiming them cannot be written
    try:
        code = wait_child(worker, 30)
    finally:
        disk.free()
    err = stderr_of(worker)
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert "claims of queue 'soon' failed for" in last and "no space is left on the device" in last, err
    assert jobs_left(store) == 200


SCHEMA = '''
    import os
    import tinystore

    store = tinystore.open(os.environ["STORE"])
    soon = store.queue("soon")

    @soon.work
    def handle(payload, run):
        pass
'''


def test_a_worker_whose_store_fails_in_a_way_retrying_cannot_mend_stops_at_once_and_exits_1_saying_why(
        tmp_path: Path, workers: Callable[..., Workers]) -> None:
    store = tmp_path / "store.db"
    with tinystore.open(store) as s:
        s.queue("soon").add({}, delay="1s")
    w = workers(store, SCHEMA)
    worker = w.start()
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute("ALTER TABLE tinystore_leases RENAME TO leases_by_hand")  # someone changed tinystore's tables
    conn.close()
    code = wait_child(worker, 30)
    err = stderr_of(worker)
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert "does not hold tinystore's tables" in last and "no such table: tinystore_leases" in last, err
    assert "tries it again" not in err  # not an outage: nothing to wait out


def test_a_serving_worker_whose_store_file_is_renamed_stops_at_once_and_exits_1_saying_so(
        tmp_path: Path, workers: Callable[..., Workers]) -> None:
    store = tmp_path / "store.db"
    with tinystore.open(store) as s:
        s.queue("soon").add_many([tinystore.Job(n, delay="3s") for n in range(100)])
    w = workers(store, SCHEMA)
    worker = w.start()
    store.rename(tmp_path / "moved.db")
    code = wait_child(worker, 30)
    err = stderr_of(worker)
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert "renamed" in last, err
    assert jobs_left(tmp_path / "moved.db") == 100
