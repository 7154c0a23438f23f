"""``tinystore check FILE``: every page read, exit 0 when whole, 1 when damaged, 2 for bad input; and the
commands that only read (status, jobs, show, check) read a store this process may not write.

The damage is real: bits flipped in the store file while no process has it
open, or text that is not UTF-8 written into a row through sqlite3.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import tinystore
from clitools import TIMEOUT, App, one_error_line


def fill(app: App, jobs: int) -> tinystore.Store:
    store = app.open()
    store.queue("echo").add_many([tinystore.Job({"n": n}, id=f"e{n:04}") for n in range(jobs)])
    store.close()
    app.stores.remove(store)
    return store


def root_page(path: str, name: str) -> tuple[int, int]:
    """Where the first page of a table or index begins in the file, and the page size."""
    conn = sqlite3.connect(path)
    try:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return (root - 1) * size, size


def flip(path: str, offset: int, mask: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ mask]))


def check(app: App, *args: str) -> tuple[int, dict]:
    result = app.cli("check", app.db, "--json", *args)
    assert result.stderr == "", result.stderr
    return result.returncode, json.loads(result.stdout)


def test_check_of_a_whole_store_exits_0_says_ok_and_writes_nothing(app: App) -> None:
    fill(app, 50)
    before = Path(app.db).read_bytes()
    code, report = check(app)
    assert code == 0 and report["ok"] is True
    assert (report["check"], report["jobs"], report["problems"], report["unreadable_jobs"]) == (
        "integrity_check", 50, [], [])
    text = app.cli("check", app.db, "--quick")
    assert text.returncode == 0, text
    assert text.stdout == f"{app.db}: ok: quick_check found no damage in its {report['pages']} pages, and each of " \
                          f"its 50 jobs reads\n"
    assert Path(app.db).read_bytes() == before


def test_check_finds_bits_flipped_in_the_due_jobs_index_that_hid_waiting_jobs_from_every_worker(app: App) -> None:
    fill(app, 600)
    start, _ = root_page(app.db, "tinystore_jobs_due_priority")  # the index claims read
    with open(app.db, "rb") as f:
        f.seek(start)
        header = f.read(5)
    assert header[0] == 0x02, "the index must have an interior page for this test"
    cells = int.from_bytes(header[3:5], "big")
    flip(app.db, start + 4, cells ^ 1)  # the interior page now names one child of several: the rest are lost

    store = app.open()  # what the damage does: no error, and most of the waiting jobs never run
    ran: list[int] = []
    store.queue("echo").work(lambda payload, run: ran.append(payload["n"]))
    store.run_until_idle()
    assert 0 < len(ran) < 600 and store.stats()["echo"]["waiting"] == 600 - len(ran)

    code, report = check(app)
    assert code == 1 and report["ok"] is False
    assert any("missing from index tinystore_jobs_due_priority" in p for p in report["problems"])
    assert "REINDEX" in report["advice"]
    text = app.cli("check", app.db)
    assert text.returncode == 1 and text.stdout.startswith(f"{app.db}: damaged\nintegrity_check found ")
    assert "what to do: the tables are whole; only indexes" in text.stdout

    conn = sqlite3.connect(app.db)  # what the advice says, as the sqlite3 shell would run it
    conn.executescript("REINDEX; VACUUM;")
    conn.close()
    assert check(app)[0] == 0
    store.run_until_idle()
    assert sorted(ran) == list(range(600))


def test_check_names_each_job_whose_payload_is_not_utf8_and_exits_1(app: App) -> None:
    fill(app, 5)
    conn = sqlite3.connect(app.db)
    with conn:
        conn.execute("UPDATE tinystore_jobs SET payload = CAST(x'7b22ff' AS TEXT) WHERE id = 'e0003'")
    conn.close()
    code, report = check(app)
    assert code == 1 and report["problems"] == []
    [bad] = report["unreadable_jobs"]
    assert (bad["queue"], bad["id"]) == ("echo", "e0003") and "not UTF-8" in bad["why"]
    assert "a worker fails each for good" in report["advice"]


def test_check_of_a_page_sqlite_cannot_read_exits_1_and_says_to_restore_a_backup(app: App) -> None:
    fill(app, 5)
    start, _ = root_page(app.db, "tinystore_jobs")
    flip(app.db, start + 3, 0xFF)
    flip(app.db, start + 4, 0xFF)
    code, report = check(app)
    assert code == 1 and report["problems"]
    assert "restore" in report["advice"] and ".recover" in report["advice"]

    listing = app.cli("jobs", app.db, "echo")  # a command that reads the damaged page says what to run
    assert listing.returncode == 2
    assert f"is damaged (database disk image is malformed): run `tinystore check {app.db}`" in one_error_line(listing)


def test_check_refuses_bad_input_with_exit_2(app: App) -> None:
    notes = app.folder / "notes.txt"
    notes.write_text("not a database\n")
    other = str(app.folder / "other.db")
    conn = sqlite3.connect(other)
    conn.execute("create table notes (body text)")
    conn.close()
    expected = {
        str(app.folder / "missing.db"): "no such file",
        str(app.folder): "is a directory",
        str(notes): "it is not a SQLite database",
        other: "it has no tinystore tables",
    }
    results = app.cli_all(*(["check", path] for path in expected))
    for (path, why), result in zip(expected.items(), results):
        assert result.returncode == 2 and result.stdout == "", (path, result)
        assert why in one_error_line(result), (path, result.stderr)


# The commands that only read, on a store this process may not write. Root passes permission bits by, so
# the commands run without the powers that do (as tests/test_store_open.py does).

SETPRIV = shutil.which("setpriv")
POWERS = "-dac_override,-dac_read_search,-fowner"


def unprivileged(app: App, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "tinystore.cli", *args]
    if os.geteuid() == 0:
        if SETPRIV is None:
            pytest.skip("running as root without setpriv: file permissions cannot be shown to hold")
        command = [SETPRIV, f"--inh-caps={POWERS}", f"--bounding-set={POWERS}", "--"] + command
    return subprocess.run(command, cwd=app.folder, env=app.env, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.fixture
def read_only(app: App):
    """The test's folder and store made read-only, and writable again at the end."""
    yield lambda: [path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222) for path in (Path(app.db), app.folder)]
    for path in (app.folder, *app.folder.iterdir()):
        path.chmod(stat.S_IMODE(path.stat().st_mode) | stat.S_IWUSR)


def test_status_jobs_show_and_check_read_a_store_that_this_process_may_not_write(app: App, read_only) -> None:
    store = app.open()
    store.queue("boom").add({}, id="b1")
    store.queue("echo").add({"n": 1}, id="e1", delay="1h")
    store.close()
    app.stores.remove(store)
    read_only()
    listing = sorted(os.listdir(app.folder))
    before = Path(app.db).read_bytes()

    status = unprivileged(app, "status", app.db, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["queues"]["echo"]["scheduled"] == 1
    jobs = unprivileged(app, "jobs", app.db, "echo", "--json")
    assert jobs.returncode == 0, jobs.stderr
    assert [(j["id"], j["state"]) for j in json.loads(jobs.stdout)["jobs"]] == [("e1", "scheduled")]
    show = unprivileged(app, "show", app.db, "boom", "b1", "--json")
    assert show.returncode == 0, show.stderr
    assert (json.loads(show.stdout)["state"], json.loads(show.stdout)["lease"]) == ("waiting", None)
    assert unprivileged(app, "check", app.db).returncode == 0

    retry = unprivileged(app, "retry", app.db, "boom", "b1")  # a command that writes says why it cannot
    assert retry.returncode == 2 and "not writable" in one_error_line(retry)
    assert sorted(os.listdir(app.folder)) == listing and Path(app.db).read_bytes() == before


def test_status_jobs_and_show_write_nothing_to_a_store_they_read(app: App) -> None:
    fill(app, 3)
    conn = sqlite3.connect(app.db)  # a process that died with the store open, its registration left behind
    with conn:
        conn.execute("INSERT INTO tinystore_processes (pid, host, started) VALUES (999999, 'gone', 0)")
    conn.close()
    before = app.dump()
    for command in (["status", app.db], ["jobs", app.db, "echo"], ["show", app.db, "echo", "e0001"]):
        assert app.cli(*command).returncode == 0
    assert app.dump() == before  # no registration of their own, and no recovery: that is a worker's open


def test_check_finds_counts_that_stats_reads_off_from_the_jobs_and_its_advice_counts_them_again(app: App) -> None:
    fill(app, 5)
    conn = sqlite3.connect(app.db)  # as a restore of part of a file could leave them: rows moved under the counts
    with conn:
        conn.execute("UPDATE tinystore_queue_counts SET queued = queued + 3, done = 2 WHERE queue = 'echo'")
    conn.close()
    code, report = check(app)
    assert code == 1 and report["unreadable_jobs"] == []
    assert report["problems"] == ["the jobs per state kept for stats() are off in queue 'echo': kept queued 8, "
                                  "running 0, done 2, failed 0, repeating 0; the jobs are queued 5, running 0, "
                                  "done 0, failed 0, repeating 0"]
    assert "only the counts stats() reads are off" in report["advice"]

    recount = report["advice"].split('"')[1]  # what the advice says, as the sqlite3 shell would run it
    conn = sqlite3.connect(app.db, isolation_level=None)
    conn.executescript(recount)
    conn.close()
    assert check(app)[0] == 0
    store = app.open()
    assert store.stats()["echo"]["waiting"] == 5
