"""Faults of the machine around the store's file: one file, one name, for as long as it is open.

SQLite keeps a WAL beside the name a file is opened by. A file with two names
(a hard link, a bind mount of the file) gets one WAL per name, and a file
deleted, renamed or replaced while open keeps taking commits that no later
open sees. These tests do it to real files, with real processes: the store
must refuse the second name at open, and refuse to write (``StoreGone``)
once its path no longer names the file it opened, rather than acknowledge
jobs it cannot keep (DUR-01).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tinystore
from helpers import kill_child, run_child, start_child, wait_for_line

LOST = "lease ended without a settlement"

# A child that adds job-0.. through PATH, printing "added N" after each add returned, until COUNT; on a
# line "add" on stdin it adds one more and says "added" or "refused <Error class>: <message>".
ADDER = r"""
import sys
import tinystore

path, count = sys.argv[1], int(sys.argv[2])
store = tinystore.open(path)
q = store.queue("q")
n = 0
for n in range(count):
    q.add({"n": n}, id=f"job-{n}")
print("added", count, flush=True)
for line in sys.stdin:
    if line.strip() == "close":
        store.close()
        print("closed", flush=True)
        continue
    try:
        n += 1
        q.add({"n": n}, id=f"job-{n}")
        print("added", flush=True)
    except tinystore.Error as exc:
        print(f"refused {type(exc).__name__}: {exc}", flush=True)
"""


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "a.db")


def beside(path: str) -> list[str]:
    return sorted(name for name in os.listdir(os.path.dirname(path)))


def ids(path: str) -> list[str]:
    with tinystore.open(path) as store:
        return sorted(job.id for job in store.queue("q").jobs(limit=1000))


def ask(proc: subprocess.Popen, line: str, answer: str = "") -> str:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return wait_for_line(proc, answer)


def start_adder(path: str, count: int) -> subprocess.Popen:
    proc = start_child(ADDER, path, str(count), stdin=subprocess.PIPE)
    wait_for_line(proc, f"added {count}")
    return proc


# One process, two opens

def test_DUR_01_a_store_opened_twice_in_one_process_keeps_its_wal_when_another_process_closes_and_loses_no_add(path):
    # A read of the file through a descriptor of tinystore's own (closed after) would drop every POSIX lock
    # this process holds on it, SQLite's included: another process's close would then take itself for the
    # last, checkpoint and delete the WAL, and what this process commits afterwards would go to the deleted one.
    with tinystore.open(path) as first, tinystore.open(path):
        run_child(f"import tinystore; tinystore.open({path!r}).close()", check=True)
        assert os.path.exists(path + "-wal"), "another process's close deleted the WAL of a store still open"
        assert first.queue("q").add({}, id="after").added
        seen = run_child(f"import tinystore; print(tinystore.open({path!r}).queue('q').get('after').state)")
        assert seen.stdout.strip() == "waiting", seen.stderr


# Two names

def test_open_refuses_a_store_file_that_has_another_hard_link_and_writes_nothing(path, tmp_path):
    with tinystore.open(path) as store:
        store.queue("q").add({}, id="kept")
    other = str(tmp_path / "b.db")
    os.link(path, other)
    before = (beside(path), Path(path).read_bytes())
    for name in (path, other):
        with pytest.raises(tinystore.InvalidArgument) as caught:
            tinystore.open(name)
        assert name in str(caught.value) and "2 hard links" in str(caught.value)
        assert "remove the other links" in str(caught.value)
    assert (beside(path), Path(path).read_bytes()) == before
    os.remove(other)
    assert ids(path) == ["kept"]


def test_DUR_01_two_processes_adding_through_two_hard_linked_names_lose_no_acknowledged_job(path, tmp_path):
    # Before: both got 300 acknowledgements, each name its own WAL; afterwards only one name's 300 remained.
    # Now the name linked while the first process adds is refused, and every acknowledged job is kept.
    first = start_adder(path, 300)
    other = str(tmp_path / "b.db")
    os.link(path, other)
    second = run_child(ADDER, other, "300")
    assert second.returncode != 0 and "InvalidArgument" in second.stderr and "hard links" in second.stderr
    assert ask(first, "add", "added") == "added"  # the first name goes on: its file is the same
    ask(first, "close", "closed")
    kill_child(first)
    os.remove(other)
    assert ids(path) == sorted(f"job-{n}" for n in range(301))


UNSHARE = shutil.which("unshare")


def can_bind_mount(tmp_path: Path) -> bool:
    if UNSHARE is None:
        return False
    a, b = tmp_path / "probe-a", tmp_path / "probe-b"
    a.touch()
    b.touch()
    done = subprocess.run([UNSHARE, "-rm", "mount", "--bind", str(a), str(b)], capture_output=True)
    return done.returncode == 0


def test_open_refuses_a_store_file_bind_mounted_onto_another_name_by_either_name(path, tmp_path):
    if not can_bind_mount(tmp_path):
        pytest.skip("no unshare -rm / mount --bind here")
    with tinystore.open(path) as store:
        store.queue("q").add({}, id="kept")
    target = tmp_path / "mounted.db"
    target.touch()
    code = (f"import tinystore\nfor name in {[str(target), path]!r}:\n"
            "    try:\n        tinystore.open(name)\n        print('opened', name)\n"
            "    except tinystore.InvalidArgument as exc:\n        print('refused', exc)\n")
    script = f"mount --bind {path} {target} && exec {sys.executable} -c \"$0\""
    done = subprocess.run([UNSHARE, "-rm", "sh", "-c", script, code], capture_output=True, text=True,
                          env={**os.environ}, timeout=60)
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout + done.stderr
    assert lines[0].startswith("refused") and "mount point" in lines[0] and "mount the folder" in lines[0]
    assert lines[1].startswith("refused") and f"bind-mounted onto {target}" in lines[1]
    assert ids(path) == ["kept"]


# The file deleted, renamed or replaced while open

def test_DUR_01_adds_after_the_store_file_was_deleted_raise_StoreGone_and_none_is_acknowledged(path, tmp_path):
    # Before: after the unlink, 100 of 100 adds returned, and the next open made an empty store.
    store = tinystore.open(path)
    q = store.queue("q")
    q.add({}, id="before")
    os.remove(path)
    for n in range(100):
        with pytest.raises(tinystore.StoreGone) as caught:
            q.add({}, id=f"after-{n}")
    assert "no longer there: it was deleted, or renamed" in str(caught.value) and path in str(caught.value)
    with pytest.raises(tinystore.StoreGone):
        with store.transaction() as tx:
            tx.execute("create table if not exists t (x)")
    store.close()
    # SQLite leaves the WAL of a file that moved beside its old name; a new file there would lose it.
    with pytest.raises(tinystore.Error) as refused:
        tinystore.open(path)
    assert "the store file is missing" in str(refused.value) and f"{path}-wal" in str(refused.value)
    assert not os.path.exists(path)
    os.rename(path + "-wal", str(tmp_path / "aside-wal"))
    assert ids(path) == []  # moved aside: a new store


def test_DUR_01_a_store_renamed_while_a_process_adds_refuses_the_next_add_and_keeps_every_acknowledged_job_for_its_name(
        path, tmp_path):
    # Before: the adds after the rename returned, into a WAL beside the old name that the file no longer has.
    adder = start_adder(path, 10)
    renamed = str(tmp_path / "c.db")
    os.rename(path, renamed)
    answer = ask(adder, "add", "")
    assert answer.startswith("refused StoreGone") and "deleted, or renamed" in answer
    ask(adder, "close", "closed")
    kill_child(adder)  # closed or killed, its last commits stay in a.db-wal, beside the old name
    with pytest.raises(tinystore.Error) as caught:
        tinystore.open(path)  # a new store there would delete that WAL
    assert f"{path}-wal" in str(caught.value) and "Give the file its name back" in str(caught.value)
    assert not os.path.exists(path), "the refused open made a new file"
    os.rename(renamed, path)  # the file given its name back: its WAL is its own again
    # Every acknowledged job, and perhaps the add that found the file gone (its commit came first).
    assert ids(path) in (sorted(f"job-{n}" for n in range(10)), sorted(f"job-{n}" for n in range(11)))


def test_a_file_renamed_over_an_open_store_refuses_its_adds_and_is_never_opened_with_the_old_wal_replayed_onto_it(
        path, tmp_path):
    # Before: the adds returned, and the next open replayed the WAL of the file that had the name onto
    # the file renamed over it.
    adder = start_adder(path, 10)
    other = str(tmp_path / "c.db")
    with tinystore.open(other) as store:
        store.queue("q").add({}, id="other-file")
    os.rename(other, path)
    answer = ask(adder, "add", "")
    assert answer.startswith("refused StoreGone") and "now another file" in answer
    with pytest.raises(tinystore.Error) as caught:
        tinystore.open(path)  # the adder still has the file that was there open, with its WAL beside the name
    assert "it was replaced, or renamed over" in str(caught.value)
    ask(adder, "close", "closed")
    kill_child(adder)
    with pytest.raises(tinystore.Error) as caught:
        tinystore.open(path)  # ended: its WAL is left beside the name
    assert f"{path}-wal" in str(caught.value) and "was left by the file that was there before" in str(caught.value)
    os.rename(path + "-wal", str(tmp_path / "aside-wal"))
    os.rename(path + "-shm", str(tmp_path / "aside-shm"))
    assert ids(path) == ["other-file"]


def test_DUR_03_the_first_open_of_a_copy_of_the_store_folder_ends_the_leases_of_the_originals_processes_at_once(
        path, tmp_path):
    worker = start_child(r"""
import sys, threading
import tinystore
store = tinystore.open(sys.argv[1])
q = store.queue("q")
q.add({}, id="j")
q.work(lambda payload, run: (print("running", flush=True), threading.Event().wait()))
store.run_until_idle()
""", path)
    try:
        wait_for_line(worker, "running")
        copy = tmp_path / "copy"
        shutil.copytree(tmp_path, copy, ignore=shutil.ignore_patterns("copy"))
        with tinystore.open(str(copy / "a.db")) as store:
            job = store.queue("q").get("j")
            assert (job.state, job.attempt, LOST in (job.error or "")) == ("waiting", 1, True), \
                "the copy's open must end the leases of processes that have the original open"
        with tinystore.open(path) as store:
            assert store.queue("q").get("j").state == "running"  # the original's worker lives on
    finally:
        kill_child(worker)
