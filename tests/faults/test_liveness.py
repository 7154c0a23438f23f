"""Faults of the machine around the liveness locks (DUR-03): a live process is never taken for dead.

Real processes on a real store file: a worker holds a lease with a handler
that blocks, something happens to it or to the files beside the store (its
lock file closed by a backup's copy, deleted, the process forked), and the
next open elsewhere must tell a live process from a dead one. Leases last
30 s (where a test does not shorten them on purpose), so a lease that ends
within a test's few seconds was ended by an open that judged its process dead,
or by one that found it dead (``about`` says which: the worker's exit status
and stderr, where a fatal signal prints its threads, and the registrations).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

import tinystore
from helpers import kill_child, run_child, start_child, stderr_of, wait_for_line

LOST = "lease ended without a settlement"

# A worker: opens the store, serves queue "q" whose handler does ACTION, then says so and blocks.
WORKER = r"""
import faulthandler; faulthandler.enable()  # a fatal signal (SIGBUS, SIGSEGV) prints every thread to stderr
import os, shutil, sqlite3, sys, threading, time
import tinystore
from tinystore.backends.sqlite import _liveness

path, action, lease = sys.argv[1], sys.argv[2], sys.argv[3]
if action == "posix":
    _liveness.OFD = False  # as on a system without open file description locks
store = tinystore.open(path)
q = store.queue("q", lease=lease)

def handler(payload, run):
    if action == "copy":  # a backup from inside the worker, as docs/reliability.md says to take one
        # The folder by a copy, which opens and closes the lock file, but not SQLite's files: a close of one
        # of those would drop SQLite's own locks in this process. The database by SQLite's backup API.
        folder, name = os.path.split(path)
        shutil.copytree(folder, folder + "-backup", ignore=shutil.ignore_patterns(name, name + "-wal", name + "-shm"))
        source, copy = sqlite3.connect(path), sqlite3.connect(os.path.join(folder + "-backup", name))
        source.backup(copy)
        copy.close()
        source.close()
    print(f"running {run.id} {run.attempt}", flush=True)
    threading.Event().wait()

q.work(handler)
threading.Thread(target=store.run_until_idle, daemon=True).start()
for line in sys.stdin:  # "open": open the store a second time, and say how that went
    try:
        again = tinystore.open(path)
        print("opened again", flush=True)
    except Exception as exc:
        print(f"failed {type(exc).__name__}: {exc}", flush=True)
"""


@pytest.fixture
def path(tmp_path: Path) -> str:
    folder = tmp_path / "data"
    folder.mkdir()
    return str(folder / "app.db")


def prepare(path: str, *ids: str) -> None:
    with tinystore.open(path) as store:
        q = store.queue("q")
        for id in ids:
            q.add({}, id=id)


def start_worker(path: str, action: str = "none", lease: str = "30s"):
    proc = start_child(WORKER, path, action, lease, stdin=subprocess.PIPE)
    wait_for_line(proc, "running j 1")
    return proc


def state(path: str, id: str = "j") -> tuple:
    """The job as the next open sees it: an open in a new process, which knows nothing of the lock file."""
    done = run_child(f"""
import tinystore
with tinystore.open({path!r}) as store:
    job = store.queue("q").get({id!r})
    print(job.state, job.attempt, bool(job.error and {LOST!r} in job.error))
""", timeout=60)
    assert done.returncode == 0, done.stderr
    state, attempt, lost = done.stdout.split()
    return (state, int(attempt), LOST if lost == "True" else None)


def about(worker, path: str) -> str:
    """What a failed assertion about a worker says: whether it lives, its stderr, and who is registered."""
    status = worker.poll()
    try:
        registered = rows(path, "SELECT id, pid, lock_dev, lock_ino FROM tinystore_processes")
    except sqlite3.Error as exc:
        registered = repr(exc)
    return (f"the worker (pid {worker.pid}) is {'alive' if status is None else f'gone, exit status {status}'}; "
            f"registered (id, pid, lock file): {registered}; the worker's stderr:\n{stderr_of(worker)}")


def rows(path: str, sql: str, params: tuple = ()) -> list:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_DUR_03_a_worker_that_backs_up_the_store_folder_while_it_runs_a_job_is_not_taken_for_dead(path):
    # shutil.copytree opens and closes the lock file in the worker: a POSIX record lock, which belongs
    # to the process, was dropped by that close, and the next open ended the live worker's lease.
    prepare(path, "j")
    worker = start_worker(path, "copy")
    try:
        backup = os.path.dirname(path) + "-backup"
        assert os.path.exists(backup + "/app.db-tinystore.lock")
        assert rows(backup + "/app.db", "SELECT id FROM tinystore_jobs") == [("j",)]
        assert state(path) == ("running", 1, None), \
            f"a live worker was taken for dead after a backup's copy: {about(worker, path)}"
        assert worker.poll() is None, about(worker, path)
    finally:
        kill_child(worker)
    assert state(path) == ("waiting", 1, LOST)  # and once it is dead, it is: the next open ends its lease


def test_DUR_03_a_deleted_lock_file_neither_makes_a_live_worker_look_dead_nor_keeps_a_killed_one_alive(path):
    prepare(path, "j")
    worker = start_worker(path)
    try:
        os.remove(path + "-tinystore.lock")
        assert state(path) == ("running", 1, None), \
            f"deleting the lock file made a live worker look dead: {about(worker, path)}"
        assert os.path.exists(path + "-tinystore.lock")  # the open made a new one
    finally:
        kill_child(worker)
    assert state(path) == ("waiting", 1, LOST), "a killed worker's lease must still end at the next open"


def test_a_process_that_had_the_old_lock_file_open_opens_the_store_again_after_it_was_deleted(path):
    prepare(path, "j")
    worker = start_worker(path)
    os.remove(path + "-tinystore.lock")
    other = start_child(r"""
import sys, threading
import tinystore
store = tinystore.open(sys.argv[1])
print("open", flush=True)
threading.Event().wait()
""", path)
    try:
        wait_for_line(other, "open")  # registers in a new lock file, and stays open
        worker.stdin.write("open\n")
        worker.stdin.flush()
        line = wait_for_line(worker, "")
        assert line == "opened again", line
        assert rows(path, "SELECT count(*) FROM tinystore_processes WHERE pid = ?", (other.pid,)) == [(1,)], \
            "the worker's second open took a live process for dead"
        assert state(path) == ("running", 1, None), about(worker, path)
    finally:
        kill_child(other)
        kill_child(worker)


def test_DUR_03_a_live_worker_whose_lock_file_was_deleted_holds_its_byte_in_the_new_one_from_its_next_write(path):
    prepare(path, "j")
    worker = start_worker(path, lease="1s")  # renewed every 0.5 s: a write
    try:
        os.remove(path + "-tinystore.lock")
        assert state(path) == ("running", 1, None), about(worker, path)
        new = os.stat(path + "-tinystore.lock")
        deadline = time.monotonic() + 10
        while True:
            found = rows(path, "SELECT lock_dev, lock_ino FROM tinystore_processes WHERE pid = ?", (worker.pid,))
            if found == [(new.st_dev, new.st_ino)] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert found == [(new.st_dev, new.st_ino)], \
            f"the worker never moved to the new lock file: {about(worker, path)}"
        assert state(path) == ("running", 1, None), about(worker, path)
    finally:
        kill_child(worker)
    assert state(path) == ("waiting", 1, LOST)  # its byte in the new file told that it died


def test_DUR_03_with_posix_record_locks_where_ofd_locks_are_missing_a_live_worker_is_alive_and_a_dead_one_dead(path):
    prepare(path, "j")
    worker = start_worker(path, "posix")
    try:
        assert state(path) == ("running", 1, None), about(worker, path)
    finally:
        kill_child(worker)
    assert state(path) == ("waiting", 1, LOST)


# Forks. Each scene runs in a process of its own, which forks; the test reads what it printed.

FORK_PREAMBLE = r"""
import os, sys, threading, time
import tinystore

path = sys.argv[1]

def holding():
    '''The store open, with job "j" claimed by a handler that blocks: this process holds its lease.'''
    store = tinystore.open(path)
    q = store.queue("q")
    q.add({}, id="j")
    started = threading.Event()
    q.work(lambda payload, run: (started.set(), threading.Event().wait()))
    threading.Thread(target=store.run_until_idle, daemon=True).start()
    assert started.wait(30)
    return store, q

def wait_for(pid, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"
"""


def test_a_forked_child_that_closes_its_copy_of_the_store_leaves_the_parents_registration_alone(path):
    parent = start_child(FORK_PREAMBLE + r"""
store, q = holding()
child = os.fork()
if child == 0:
    store.close()
    os._exit(0)
print("child", wait_for(child), flush=True)
threading.Event().wait()
""", path)
    try:
        assert wait_for_line(parent, "child") == "child 0"
        assert rows(path, "SELECT count(*) FROM tinystore_processes WHERE pid = ?", (parent.pid,)) == [(1,)], \
            "the child's close deleted its parent's registration"
        assert state(path) == ("running", 1, None)  # and every other process can still open the store
        assert state(path) == ("running", 1, None)
    finally:
        kill_child(parent)
    assert state(path) == ("waiting", 1, LOST)


def test_a_forked_child_that_uses_its_copy_of_the_store_gets_an_Error_saying_to_open_it_after_the_fork(path):
    done = run_child(FORK_PREAMBLE + r"""
store, q = holding()
q2 = store.queue("other")
q2.add({}, id="k")
q2.work(lambda payload, run: print("the child ran", run.id, flush=True))
child = os.fork()
if child == 0:
    for name, call in [("add", lambda: q.add({}, id="from-child")), ("get", lambda: q.get("j")),
                       ("serve", store.run_until_idle), ("queue", lambda: store.queue("q"))]:
        try:
            call()
            print(name, "worked", flush=True)
        except tinystore.Error as exc:
            print(name, "refused:", exc, flush=True)
    store.close()
    os._exit(0)
print("child", wait_for(child), flush=True)
print("k", q2.get("k").state, "from-child", q.get("from-child"), flush=True)
os._exit(0)
""", path, timeout=60)
    lines = done.stdout.splitlines()
    assert lines[-2:] == ["child 0", "k waiting from-child None"], done.stdout + done.stderr
    said = {line.split()[0]: line for line in lines[:-2]}
    assert set(said) == {"add", "get", "serve", "queue"}, done.stdout + done.stderr
    for line in said.values():
        assert "refused:" in line and "forked" in line and "open the store in each process after the fork" in line.lower()


def test_children_forked_while_the_parent_adds_from_threads_hang_neither_in_add_nor_at_their_exit(path):
    done = run_child(FORK_PREAMBLE + r"""
store = tinystore.open(path)
q = store.queue("q")
stop = threading.Event()
def adding():
    while not stop.is_set():
        q.add({})
threads = [threading.Thread(target=adding) for _ in range(3)]
for t in threads:
    t.start()
outcomes = []
for n in range(20):
    child = os.fork()
    if child == 0:
        try:
            q.add({})
            print("the child added", flush=True)
        except tinystore.Error:
            pass
        store.close()
        sys.exit(0)  # the interpreter's own exit: nothing of the parent's may be closed or waited for
    outcomes.append(wait_for(child, 10))
    if outcomes[-1] == "hung":
        break
    time.sleep(0.003)
stop.set()
for t in threads:
    t.join()
print("outcomes", *outcomes, flush=True)
print("waiting", store.stats()["q"]["waiting"] > 0, flush=True)
store.close()
""", path, timeout=120)
    assert done.stdout.splitlines()[-2:] == ["outcomes " + " ".join(["0"] * 20), "waiting True"], \
        done.stdout + done.stderr


def test_a_child_forked_while_its_parent_serves_in_the_background_closes_its_copy_at_once(path):
    done = run_child(FORK_PREAMBLE + r"""
store = tinystore.open(path)
q = store.queue("q")
q.work(lambda payload, run: time.sleep(0.005))
store.start()
for n in range(50):
    q.add({})
child = os.fork()
if child == 0:
    store.close()  # the parent's serving threads are not the child's to wait for
    store.close()
    sys.exit(0)
print("child", wait_for(child, 10), flush=True)
store.close()
print("parent closed", flush=True)
""", path, timeout=60)
    assert done.stdout.splitlines() == ["child 0", "parent closed"], done.stdout + done.stderr


def test_a_child_forked_from_a_process_with_the_store_open_is_refused_a_new_open_that_would_lose_its_jobs(path):
    # Opened anew in such a child, SQLite takes no lock on the file (it believes the parent's are its own):
    # the parent's close deleted the WAL under the child, and the child's next adds were lost.
    done = run_child(FORK_PREAMBLE + r"""
store = tinystore.open(path)
child = os.fork()
if child == 0:
    try:
        tinystore.open(path)
        print("opened", flush=True)
    except tinystore.Error as exc:
        print("refused:", exc, flush=True)
    os._exit(0)
print("child", wait_for(child), flush=True)
store.close()
""", path, timeout=60)
    first = done.stdout.splitlines()[0]
    assert first.startswith("refused:") and "forked from a process that had the store open" in first, \
        done.stdout + done.stderr


def test_a_child_forked_after_its_parent_closed_the_store_opens_it_and_keeps_every_job_it_added(path):
    done = run_child(FORK_PREAMBLE + r"""
store = tinystore.open(path)
store.queue("q").add({}, id="parent")
store.close()
child = os.fork()
if child == 0:
    with tinystore.open(path) as mine:
        for n in range(50):
            mine.queue("q").add({}, id=f"child-{n}")
    os._exit(0)
print("child", wait_for(child), flush=True)
""", path, timeout=60)
    assert done.stdout.splitlines() == ["child 0"], done.stdout + done.stderr
    with tinystore.open(path) as store:
        assert store.stats()["q"]["waiting"] == 51


def test_DUR_03_a_parent_killed_while_its_forked_child_lives_on_has_its_lease_ended_at_the_next_open(path):
    # The child's copy of the lock file's descriptor would keep the parent's lock: it is let go at the fork.
    parent = start_child(FORK_PREAMBLE + r"""
store, q = holding()
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
print("forked", child, flush=True)
threading.Event().wait()
""", path)
    child = int(wait_for_line(parent, "forked").split()[1])
    try:
        assert state(path) == ("running", 1, None)
        kill_child(parent)
        assert state(path) == ("waiting", 1, LOST), "the child kept its dead parent alive"
    finally:
        os.kill(child, 9)
