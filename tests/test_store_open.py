"""Opening a store file: what open does to a file, what it refuses, queue options, threads.

Every test works on a real file in a temporary folder. The application's
own database is made with the sqlite3 module, as an application would.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import json
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import tinystore
from helpers import Background, run_until_idle

T = 1_800_000_000.0  # the `clock` fixture's start
WAIT = 30


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_app_database(path: Path) -> None:
    """An application's database: tables with rows, an index, a view, a trigger, its own pragmas."""
    conn = sqlite3.connect(path)
    conn.executescript("""
        create table messages (id integer primary key, chat integer not null, body text not null);
        create index messages_chat on messages (chat);
        create table audit (message integer, note text);
        create view recent as select id, body from messages order by id desc limit 10;
        create trigger messages_audit after insert on messages
            begin insert into audit values (new.id, 'added'); end;
        pragma user_version = 7;
        pragma application_id = 1234;
    """)
    conn.executemany("insert into messages (chat, body) values (?, ?)",
                     [(n % 5, f"message {n} " + "x" * 300) for n in range(300)])
    conn.commit()
    conn.close()


def app_snapshot(path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        return {
            "schema": conn.execute("select type, name, tbl_name, sql from sqlite_master "
                                   "where name not like 'tinystore%' and name not like 'sqlite_autoindex_tinystore%' "
                                   "order by name").fetchall(),
            "messages": conn.execute("select * from messages order by id").fetchall(),
            "audit": conn.execute("select * from audit order by rowid").fetchall(),
            "user_version": conn.execute("pragma user_version").fetchone()[0],
            "application_id": conn.execute("pragma application_id").fetchone()[0],
        }
    finally:
        conn.close()


# ---------------------------------------------------------------------------
# What open does to a file


def test_open_creates_the_store_file_readable_and_writable_by_its_owner_only(tmp_path):
    old = os.umask(0o022)
    try:
        store = tinystore.open(tmp_path / "app.db")  # a PathLike is a path too
        try:
            store.queue("replies").add({"message_id": 41})
            made = {f.name: stat.S_IMODE(f.stat().st_mode) for f in tmp_path.iterdir()}
        finally:
            store.close()
    finally:
        os.umask(old)
    assert "app.db" in made
    assert made == {name: 0o600 for name in made}, f"files the store made, and their modes: {made}"


def test_open_of_an_empty_file_makes_it_a_store(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    store = tinystore.open(path)
    try:
        assert store.queue("replies").add({}, id="j").added
    finally:
        store.close()


def test_open_adds_tinystore_tables_beside_the_applications_tables_and_touches_nothing_else(tmp_path, clock):
    path = tmp_path / "app.db"
    make_app_database(path)
    before = app_snapshot(path)

    store = tinystore.open(path, clock=clock)
    try:
        q = store.queue("replies")
        q.add({"message_id": 1}, id="reply:1")
        q.work(lambda payload, run: None)
        run_until_idle(store)
        q.add({"message_id": 2}, id="reply:2")
        assert len(store.query("select * from messages")) == 300  # the application's rows, through the store
    finally:
        store.close()

    assert app_snapshot(path) == before
    conn = sqlite3.connect(path)
    try:
        kept = {row[1] for row in before["schema"]}
        added = [row for row in conn.execute("select type, name, tbl_name from sqlite_master")
                 if row[1] not in kept]
        assert added, "open must add tinystore's tables"
        for kind, name, table in added:
            assert table.startswith("tinystore_"), f"{kind} {name} is on {table}, not on a tinystore_ table"
            assert name.startswith(("tinystore_", "sqlite_autoindex_tinystore_")), f"{kind} {name}"
        tables = {name for kind, name, _ in added if kind == "table"}
        assert {"tinystore_migrations", "tinystore_jobs"} <= tables
        # what the store keeps is plain JSON text that the sqlite3 shell can read
        assert conn.execute("select payload from tinystore_jobs where id = 'reply:2'").fetchone() == (
            '{"message_id":2}',)
    finally:
        conn.close()


@pytest.mark.parametrize("content", [
    b"hello, this is not a database\n" * 100,
    b"hi\n",
    b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40,
    b'{"a": "json file", "b": [1, 2, 3]}',
    bytes((n * 37 + 11) % 256 for n in range(8192)),
], ids=["text", "tiny", "png", "json", "binary"])
def test_open_refuses_a_file_that_is_not_sqlite_with_StoreCorrupt_and_leaves_it_as_it_was(tmp_path, content):
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    with pytest.raises(tinystore.StoreCorrupt) as caught:
        tinystore.open(path)
    assert isinstance(caught.value, tinystore.Error)
    assert str(path) in str(caught.value) and "SQLite" in str(caught.value)
    assert path.read_bytes() == content
    assert sorted(os.listdir(tmp_path)) == ["notes.db"], "nothing may be written beside it either"


def damage_schema_page(data: bytearray) -> None:
    data[100:4096] = bytes((n * 131 + 7) % 256 for n in range(3996))


def damage_by_truncating(data: bytearray) -> None:
    del data[len(data) // 2 + 123:]


def damage_header(data: bytearray) -> None:
    data[16:24] = b"\xff" * 8  # page size and format fields


@pytest.mark.parametrize("damage", [damage_schema_page, damage_by_truncating, damage_header],
                         ids=["schema-page", "truncated", "header"])
@pytest.mark.parametrize("made_by", ["application", "tinystore"])
def test_open_refuses_a_damaged_sqlite_file_with_StoreCorrupt_and_leaves_it_byte_for_byte(
        tmp_path, damage, made_by):
    path = tmp_path / "app.db"
    if made_by == "application":
        make_app_database(path)
    else:
        with tinystore.open(path) as store:
            store.queue("replies").add_many([{"n": n, "text": "x" * 200} for n in range(200)])
        conn = sqlite3.connect(path)
        conn.execute("pragma wal_checkpoint(truncate)")
        conn.execute("pragma journal_mode = delete")  # everything in the one file, no WAL beside it
        conn.close()
        for extra in tmp_path.iterdir():
            if extra.name != "app.db":
                extra.unlink()
    data = bytearray(path.read_bytes())
    damage(data)
    path.write_bytes(bytes(data))

    with pytest.raises(tinystore.StoreCorrupt) as caught:
        tinystore.open(path)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == bytes(data), "a damaged file must be left as it was"
    assert sorted(os.listdir(tmp_path)) == ["app.db"]


def test_open_refuses_a_directory_and_leaves_it_alone(tmp_path):
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    with pytest.raises(tinystore.InvalidArgument) as caught:
        tinystore.open(folder)
    assert "directory" in str(caught.value) and str(folder) in str(caught.value)
    assert os.listdir(folder) == ["keep.txt"]
    assert sorted(os.listdir(tmp_path)) == ["jobs"]


# ---------------------------------------------------------------------------
# Paths that cannot be a store, and files this process may not use: refused, nothing made


def listing(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under ``folder``: its mode and, for a file, its bytes."""
    out = {}
    for entry in sorted(folder.rglob("*")):
        st = entry.lstat()
        content = entry.read_bytes() if stat.S_ISREG(st.st_mode) and os.access(entry, os.R_OK) else b""
        out[str(entry.relative_to(folder))] = (st.st_mode, content)
    return out


def test_open_of_a_path_whose_folder_does_not_exist_is_an_InvalidArgument_naming_it_and_creates_nothing(tmp_path):
    path = tmp_path / "no" / "such" / "dir" / "x.db"
    with pytest.raises(tinystore.InvalidArgument) as caught:
        tinystore.open(path)
    assert str(path) in str(caught.value) and "does not exist" in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert os.listdir(tmp_path) == []


def test_open_of_a_path_below_a_file_is_an_InvalidArgument_naming_it_and_leaves_the_file_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    path = tmp_path / "notes.txt" / "x.db"
    with pytest.raises(tinystore.InvalidArgument) as caught:
        tinystore.open(path)
    assert str(path) in str(caught.value) and "not a folder" in str(caught.value)
    assert (tmp_path / "notes.txt").read_text() == "mine" and os.listdir(tmp_path) == ["notes.txt"]


def test_open_of_a_symbolic_link_into_a_folder_that_does_not_exist_is_an_InvalidArgument_and_creates_nothing(
        tmp_path):
    link = tmp_path / "app.db"
    link.symlink_to(tmp_path / "gone" / "app.db")
    with pytest.raises(tinystore.InvalidArgument) as caught:
        tinystore.open(link)
    assert str(link) in str(caught.value) and "does not exist" in str(caught.value)
    assert os.listdir(tmp_path) == ["app.db"]


def test_open_of_a_named_pipe_is_an_InvalidArgument_at_once_and_writes_nothing_beside_it(tmp_path):
    pipe = tmp_path / "jobs.db"
    os.mkfifo(pipe)
    code = ("import sys, tinystore\n"
            "try:\n    tinystore.open(sys.argv[1])\n"
            "except tinystore.InvalidArgument as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code, str(pipe)], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    assert str(pipe) in done.stdout and "not a regular file" in done.stdout
    assert os.listdir(tmp_path) == ["jobs.db"]


def test_open_refuses_a_store_whose_lock_file_beside_it_is_a_directory_before_writing_the_store(tmp_path):
    path = tmp_path / "app.db"
    make_app_database(path)
    (tmp_path / "app.db-tinystore.lock").mkdir()
    before = listing(tmp_path)
    with pytest.raises(tinystore.InvalidArgument) as caught:
        tinystore.open(path)
    assert str(path) in str(caught.value) and "app.db-tinystore.lock" in str(caught.value)
    assert listing(tmp_path) == before


# Permission bits do not hold back root: as root, the child that opens drops the powers that pass them by.
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
SETPRIV = shutil.which("setpriv")
POWERS = "-dac_override,-dac_read_search,-fowner"
OPEN_IN_CHILD = """
import json, sys, tinystore
try:
    tinystore.open(sys.argv[1]).close()
    print(json.dumps(["opened", ""]))
except Exception as exc:
    print(json.dumps([[c.__name__ for c in type(exc).__mro__], str(exc)]))
"""


def open_without_privileges(path: Path) -> tuple[Any, str]:
    """Open ``path`` in a child that file permissions apply to; (the error's classes, its message), or "opened"."""
    command = [sys.executable, "-c", OPEN_IN_CHILD, str(path)]
    if ROOT:
        if SETPRIV is None:
            pytest.skip("running as root without setpriv: file permissions cannot be shown to hold")
        command = [SETPRIV, f"--inh-caps={POWERS}", f"--bounding-set={POWERS}", "--"] + command
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    classes, message = json.loads(done.stdout)
    return classes, message


@pytest.fixture
def restore_modes(tmp_path: Path):
    """Give back write permission to everything under tmp_path, so that it can be removed."""
    yield
    for entry in [tmp_path, *tmp_path.rglob("*")]:
        if not entry.is_symlink():
            entry.chmod(stat.S_IMODE(entry.stat().st_mode) | stat.S_IRWXU)


@pytest.mark.parametrize("there", ["nothing", "a store"])
def test_open_in_a_folder_that_is_not_writable_is_an_InvalidArgument_naming_it_and_creates_nothing(
        tmp_path, restore_modes, there):
    folder = tmp_path / "shared"
    folder.mkdir()
    path = folder / "app.db"
    if there == "a store":
        with tinystore.open(path) as store:
            store.queue("replies").add({}, id="kept")
    folder.chmod(0o555)
    before = listing(tmp_path)
    classes, message = open_without_privileges(path)
    assert "InvalidArgument" in classes and "Error" in classes, message
    assert str(path) in message and "not writable" in message and str(folder) in message
    assert listing(tmp_path) == before


def test_open_of_a_file_this_process_may_not_read_is_an_InvalidArgument_naming_it_and_leaves_it_alone(
        tmp_path, restore_modes):
    path = tmp_path / "app.db"
    make_app_database(path)
    path.chmod(0o200)
    before = listing(tmp_path)
    classes, message = open_without_privileges(path)
    assert "InvalidArgument" in classes, message
    assert str(path) in message and "permission denied" in message
    assert listing(tmp_path) == before


@pytest.mark.parametrize("made_by", ["application", "tinystore"])
def test_open_of_a_read_only_file_is_an_InvalidArgument_naming_it_and_leaves_it_byte_for_byte(
        tmp_path, restore_modes, made_by):
    path = tmp_path / "app.db"
    if made_by == "application":
        make_app_database(path)
    else:
        with tinystore.open(path) as store:
            store.queue("replies").add({}, id="kept")
    path.chmod(0o400)
    before = listing(tmp_path)
    classes, message = open_without_privileges(path)
    assert "InvalidArgument" in classes, message
    assert str(path) in message and "read-only" in message
    assert listing(tmp_path) == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts descriptors in /proc/self/fd")
def test_open_in_a_process_out_of_file_descriptors_is_a_tinystore_Error_naming_the_path_and_creates_nothing(
        tmp_path):
    path = tmp_path / "app.db"
    code = """
import json, os, resource, sys, tinystore
highest = max(fd for fd in map(int, os.listdir("/proc/self/fd")) if os.path.exists(f"/proc/self/fd/{fd}"))
resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
try:
    tinystore.open(sys.argv[1])
    print(json.dumps(["opened", ""]))
except Exception as exc:
    print(json.dumps([[c.__name__ for c in type(exc).__mro__], str(exc)]))
"""
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    classes, message = json.loads(done.stdout)
    assert "Error" in classes and "OSError" not in classes, (classes, message)
    assert str(path) in message and "too many open files" in message.lower()
    assert os.listdir(tmp_path) == []


def test_open_refuses_an_unknown_durability_naming_it(store_path):
    with pytest.raises(ValueError) as caught:
        tinystore.open(store_path, durability="sometimes")
    assert "'sometimes'" in str(caught.value)
    assert not os.path.exists(store_path)


def test_open_refuses_direct_for_a_sqlite_store_and_creates_nothing(tmp_path):
    path = tmp_path / "jobs.db"
    with pytest.raises(tinystore.InvalidArgument, match="direct= is for a PostgreSQL URL behind a pooler"):
        tinystore.open(path, direct="postgresql://app@db/app")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("direct", ["host=db password=s3cret-Pw", 5432, b"postgresql://app@db/app"])
def test_open_refuses_a_direct_that_is_no_postgresql_url_without_showing_it(direct):
    # Refused before any connection: the store's URL names a port nothing listens on.
    with pytest.raises(tinystore.InvalidArgument, match="direct= must be a postgresql:// or postgres:// URL") as refused:
        tinystore.open("postgresql://app@127.0.0.1:1/app", direct=direct)
    assert "s3cret" not in str(refused.value)


def test_migrations_are_versioned_in_tinystore_migrations_and_each_is_applied_once(store_path, open_store):
    def migrations() -> list[tuple]:
        conn = sqlite3.connect(store_path)
        try:
            return conn.execute("select version, applied_at from tinystore_migrations order by version").fetchall()
        finally:
            conn.close()

    first = open_store()
    first.queue("replies").add({}, id="kept")
    first.close()
    applied = migrations()
    versions = [version for version, _ in applied]
    assert versions and versions == list(range(1, len(versions) + 1))

    second = open_store()
    assert migrations() == applied, "reopening must not apply a migration again"
    assert second.queue("replies").get("kept") is not None


def test_reopening_a_store_keeps_its_jobs_and_its_queues_options(open_store, clock):
    first = open_store(clock=clock)
    first.queue("replies", attempts=3, timeout="5s").add({"n": 1}, id="j", delay="1m")
    first.close()

    second = open_store(clock=clock)
    q = second.queue("replies")  # names no option: uses what is kept
    job = q.get("j")
    assert (job.state, job.payload, job.attempts) == ("scheduled", {"n": 1}, 3)
    assert q.options.timeout == 5.0
    assert "replies" in second.queues()


def test_the_same_file_opened_twice_in_one_process_shares_its_jobs(open_store, clock):
    one, two = open_store(clock=clock), open_store(clock=clock)
    one.queue("replies").add({"n": 1}, id="j")
    assert two.queue("replies").get("j").payload == {"n": 1}
    ran = []
    two.queue("replies").work(lambda payload, run: ran.append(run.id))
    run_until_idle(two)
    assert ran == ["j"]
    assert one.queue("replies").get("j") is None
    one.close()
    assert two.queue("replies").add({}, id="after").added  # closing one leaves the other working


def test_a_second_open_in_the_same_process_does_not_end_the_first_stores_leases(open_store, clock):
    first = open_store(clock=clock)
    q = first.queue("replies")
    started, release = threading.Event(), threading.Event()

    def handler(payload, run):
        started.set()
        release.wait(WAIT)

    q.work(handler)
    q.add({}, id="j")
    bg = Background(first.run_until_idle)
    try:
        assert started.wait(WAIT)
        second = open_store(clock=clock)
        job = second.queue("replies").get("j")
        assert (job.state, job.attempt) == ("running", 1), "a live store was taken for a dead one"
    finally:
        release.set()
    bg.join()
    assert second.queue("replies").get("j") is None


def test_with_open_closes_the_store_and_everything_it_wrote_is_in_the_file(tmp_path, clock):
    path = tmp_path / "app.db"
    with tinystore.open(path, clock=clock) as store:
        q = store.queue("replies")
        q.add({"message_id": 41}, id="reply:41")

    for call in (lambda: q.add({}), lambda: q.get("reply:41"), lambda: store.queue("replies"),
                 lambda: q.jobs(), lambda: store.stats(), lambda: store.run_until_idle()):
        with pytest.raises(tinystore.Closed):
            call()
    store.close()  # closing twice is fine

    copy = tmp_path / "copy.db"
    shutil.copyfile(path, copy)  # the store file alone, as a backup would take it once the store is closed
    conn = sqlite3.connect(copy)
    try:
        assert conn.execute("select id, payload from tinystore_jobs").fetchall() == [
            ("reply:41", '{"message_id":41}')]
    finally:
        conn.close()

    with tinystore.open(path, clock=clock) as again:
        assert again.queue("replies").get("reply:41").payload == {"message_id": 41}


# ---------------------------------------------------------------------------
# Queue options: durations, rates, and what is refused


@pytest.mark.parametrize("options, quoted", [
    ({"attempts": 0}, "0"),
    ({"attempts": "3"}, "'3'"),
    ({"attempts": True}, "True"),
    ({"attempts": 2.5}, "2.5"),
    ({"concurrency": 0}, "0"),
    ({"group_concurrency": -1}, "-1"),
    ({"timeout": "soon"}, "'soon'"),
    ({"timeout": "0s"}, "'0s'"),
    ({"timeout": "1h30"}, "'1h30'"),
    ({"timeout": "10 parsecs"}, "'10 parsecs'"),
    ({"timeout": float("nan")}, "nan"),
    ({"lease": "-1s"}, "'-1s'"),
    ({"lease": -5}, "-5"),
    ({"lease": [30]}, "[30]"),
    ({"backoff": ("2s", "1s")}, "('2s', '1s')"),
    ({"backoff": "1s"}, "'1s'"),
    ({"backoff": ("0s", "1h")}, "('0s', '1h')"),
    ({"keep": "forever"}, "'forever'"),
    ({"dedupe": "1 day"}, "'1 day'"),
    ({"rate": "fast"}, "'fast'"),
    ({"rate": "0/s"}, "'0/s'"),
    ({"rate": "10/parsec"}, "'10/parsec'"),
    ({"rate": (0, "1s")}, "(0, '1s')"),
    ({"rate": (5, "0s")}, "(5, '0s')"),
    ({"rate": (5, "soon")}, "'soon'"),
    ({"group_rate": 5}, "5"),
    ({"colour": "red"}, "'colour'"),
])
def test_a_bad_queue_option_is_a_ValueError_quoting_it_and_the_kept_options_stay(store, clock, options, quoted):
    store.queue("replies", attempts=3)
    with pytest.raises(ValueError) as caught:
        store.queue("replies", **options)
    assert isinstance(caught.value, tinystore.InvalidArgument)
    assert quoted in str(caught.value), f"{caught.value} does not quote {quoted}"
    assert store.queue("replies").add({}, id="j").attempts == 3


@pytest.mark.parametrize("delay, seconds", [
    ("500ms", 0.5), ("30s", 30), ("10m", 600), ("1h30m", 5400), ("7d", 7 * 86400), ("1d12h", 129600),
    (90, 90), (1.5, 1.5), (0, 0), (timedelta(minutes=2), 120), (timedelta(milliseconds=250), 0.25),
])
def test_durations_are_text_like_500ms_or_1h30m_seconds_or_a_timedelta(store, clock, delay, seconds):
    job = store.queue("later").add({}, delay=delay)
    assert job.at.timestamp() == pytest.approx(T + seconds, abs=1e-3)
    assert job.state == ("scheduled" if seconds > 0 else "waiting")


@pytest.mark.parametrize("delay", ["soon", "1h30", "-5s", "ms", "", "5 s", "1x", -1, float("inf"), [5], True])
def test_a_bad_duration_is_a_ValueError_naming_it_and_adds_nothing(store, delay):
    q = store.queue("later")
    with pytest.raises(ValueError) as caught:
        q.add({}, id="j", delay=delay)
    assert repr(delay) in str(caught.value) or str(delay) in str(caught.value)
    assert q.get("j") is None


def test_queue_options_take_durations_and_rates_in_every_form(store):
    q = store.queue("replies", timeout="1h30m", lease=timedelta(seconds=45), backoff=("500ms", "1h"),
                    keep="7d", dedupe=86400, rate="600/m", group_rate=(5, "1s"))
    o = q.options
    assert (o.timeout, o.lease, o.backoff, o.keep, o.dedupe) == (5400.0, 45.0, (0.5, 3600.0), 604800.0, 86400.0)
    assert (o.rate, o.group_rate) == ((600, 60.0), (5, 1.0))
    for text, rate in [("100/s", (100, 1.0)), ("600/m", (600, 60.0)), ("1000/h", (1000, 3600.0)),
                       ((10, timedelta(minutes=1)), (10, 60.0)), ((3, "500ms"), (3, 0.5))]:
        assert store.queue("replies", rate=text).options.rate == rate
    assert store.queue("replies", rate=None).options.rate is None


def test_queue_options_are_kept_in_the_store_for_every_store_that_opens_it(open_store, clock):
    one = open_store(clock=clock)
    one.queue("replies", attempts=4, rate="600/m")
    two = open_store(clock=clock)
    q = two.queue("replies")
    assert (q.options.attempts, q.options.rate) == (4, (600, 60.0))
    two.queue("replies", attempts=6)  # changes the option it names, for every store
    assert one.queue("replies").add({}, id="j").attempts == 6
    assert one.queue("replies").options.rate == (600, 60.0)


# ---------------------------------------------------------------------------
# Many threads


def test_a_store_used_from_8_threads_adding_at_once_loses_nothing(store):
    q = store.queue("busy")
    barrier = threading.Barrier(8)

    def add(t: int) -> None:
        barrier.wait(WAIT)
        for n in range(50):
            job = q.add({"t": t, "n": n}, id=f"{t}-{n}")
            assert job.added and job.id == f"{t}-{n}"
            assert q.get(job.id).payload == {"t": t, "n": n}

    threads = [Background(lambda t=t: add(t)) for t in range(8)]
    for thread in threads:
        thread.join()
    jobs = q.jobs(limit=1000)
    assert sorted(job.id for job in jobs) == sorted(f"{t}-{n}" for t in range(8) for n in range(50))
    assert store.stats()["busy"]["waiting"] == 400


def test_a_store_serving_while_8_threads_add_runs_every_job_exactly_once(store):
    q = store.queue("busy")
    runs: Counter[str] = Counter()
    lock = threading.Lock()
    all_ran = threading.Event()

    def handler(payload, run):
        with lock:
            runs[run.id] += 1
            if len(runs) == 200:
                all_ran.set()

    q.work(handler)
    serving = Background(lambda: asyncio.run(store.serve_async()))
    barrier = threading.Barrier(8)

    def add(t: int) -> None:
        barrier.wait(WAIT)
        for n in range(25):
            q.add({}, id=f"{t}-{n}")

    adders = [Background(lambda t=t: add(t)) for t in range(8)]
    for adder in adders:
        adder.join()
    assert all_ran.wait(WAIT), f"{len(runs)} of 200 jobs ran"
    store.close()  # serve_async returns once the store is closed
    serving.join()
    assert len(runs) == 200 and set(runs.values()) == {1}


def test_a_connection_to_a_store_file_never_creates_the_file(tmp_path):
    from tinystore.backends.sqlite._connection import connect

    path = tmp_path / "gone.db"
    with pytest.raises(tinystore.Error) as caught:
        connect(str(path), "FULL")
    assert str(path) in str(caught.value)
    assert os.listdir(tmp_path) == [], "a file SQLite made would have its default mode, not the owner's only"


def test_a_path_with_a_NUL_in_it_is_an_InvalidArgument_and_nothing_is_made(tmp_path):
    with pytest.raises(tinystore.InvalidArgument):
        tinystore.open(str(tmp_path / "a\0b.db"))
    assert list(tmp_path.iterdir()) == []
