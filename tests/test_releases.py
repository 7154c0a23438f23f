"""Releases meeting one store (SPEC §17): a store made by 0.1.0 (tests/releases, made by make_stores.py)
is opened and served by this release, migrated once however many processes open it at once; a store of a
later release is refused and left as it was; processes of 0.1.0 and of this release serve one store at
once, each job run once. Both backends."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

import kits
import tinystore
import venvs
from tinystore.backends.postgres import _sql as pg_sql
from tinystore.backends.sqlite import _sql as sqlite_sql

RELEASES = Path(__file__).resolve().parent / "releases"
WHEEL_0_1_0 = RELEASES / "tinystore-0.1.0-py3-none-any.whl"
NEWEST = {"sqlite": sqlite_sql.MIGRATIONS[-1][0], "postgres": pg_sql._MIGRATIONS[-1][0]}
BACKENDS = pytest.mark.parametrize("kind", ["sqlite", "postgres"])


@pytest.fixture
def pg(tmp_path: Path):
    kit = kits.PostgresKit(tmp_path)
    yield kit
    kit.cleanup()


def store_of_0_1_0(kind: str, tmp_path: Path, pg: kits.PostgresKit) -> str:
    """A copy of the store 0.1.0 made: a file of the test's own, or the dump loaded into its own database."""
    if kind == "sqlite":
        return str(shutil.copy(RELEASES / "store.db", tmp_path / "store.db"))
    target = pg.new_target()
    subprocess.run(["psql", target, "-q", "-v", "ON_ERROR_STOP=1", "-f", str(RELEASES / "store.pg.sql")],
                   check=True, capture_output=True)
    return target


def rows(kind: str, target: str, table: str, pg: kits.PostgresKit) -> list[tuple]:
    """A table of tinystore's, read directly (``migrations``, ``release``...)."""
    if kind == "sqlite":
        with sqlite3.connect(target) as conn:
            return sorted(conn.execute(f"SELECT * FROM tinystore_{table}").fetchall())
    return sorted(pg.app_rows(target, f"SELECT * FROM tinystore.{table}"))


JOBS_0_1_0 = {"work": ["done:1", "done:2", "done:3", "waiting:1", "waiting:2", "waiting:3", "scheduled:1",
                       "cancelled:1"],
              "held": ["running:1"], "failing": ["failed:1"]}


def states(store: tinystore.Store) -> dict[str, object]:
    """The state of each job 0.1.0 left, by id (None: no longer kept)."""
    return {id: getattr(store.queue(queue).get(id), "state", None)
            for queue, ids in JOBS_0_1_0.items() for id in ids}


@BACKENDS
def test_a_store_made_by_0_1_0_is_opened_and_served_by_this_release(kind: str, tmp_path: Path,
                                                                     pg: kits.PostgresKit) -> None:
    target = store_of_0_1_0(kind, tmp_path, pg)
    store = tinystore.open(target)
    before = states(store)
    ran: list[tuple[str, int]] = []
    for queue in JOBS_0_1_0:
        store.queue(queue).work(lambda payload, run, queue=queue: ran.append((queue, payload["n"])))
    store.run_until_idle()
    after = states(store)
    store.close()
    # 0.1.0 left running:1 running (make_stores.py); the open ended the lease of the process that died.
    assert before["waiting:1"] == "waiting" and before["running:1"] == "waiting"
    # The waiting jobs and the one whose process died in its handler ran, once each; no other job ran.
    assert sorted(ran) == [("held", 1), ("work", 1), ("work", 2), ("work", 3)]
    assert {id: after[id] for id in ("done:1", "done:2", "done:3", "waiting:1", "running:1")} == {
        "done:1": "done", "done:2": "done", "done:3": "done", "waiting:1": "done",
        "running:1": None}  # done: its queue keeps no done job (dedupe=0)
    assert (after["scheduled:1"], after["failed:1"], after["cancelled:1"]) == (
        "scheduled", "failed", before["cancelled:1"])
    assert rows(kind, target, "release", pg)[0][1:3] == (tinystore.__version__, NEWEST[kind])
    assert [v for (v, *_) in rows(kind, target, "migrations", pg)] == list(range(1, NEWEST[kind] + 1))


OPEN_AT_ONCE = textwrap.dedent("""
    import sys
    import tinystore
    print("ready", flush=True)
    sys.stdin.readline()  # every process is started and has imported tinystore: all open at once
    tinystore.open(sys.argv[1]).close()
    print("opened", flush=True)
""")


@BACKENDS
def test_processes_opening_a_0_1_0_store_at_once_migrate_it_once(kind: str, tmp_path: Path,
                                                                  pg: kits.PostgresKit) -> None:
    target = store_of_0_1_0(kind, tmp_path, pg)
    before = rows(kind, target, "migrations", pg)
    children = [subprocess.Popen([sys.executable, "-c", OPEN_AT_ONCE, target], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for child in children:
        assert child.stdout.readline() == "ready\n"
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes = [child.communicate(timeout=60) for child in children]
    # A migration run twice would fail one opener (its table exists already, its version row is taken).
    assert [out for out, _ in outcomes] == ["opened\n"] * 4, [err for _, err in outcomes]
    after = rows(kind, target, "migrations", pg)
    assert after[:len(before)] == before  # 0.1.0's rows as they were
    assert [v for (v, *_) in after] == list(range(1, NEWEST[kind] + 1))


def snapshot(kind: str, target: str, pg: kits.PostgresKit) -> object:
    """What a refused open must leave as it was: the file's bytes; the schema's tables and their rows."""
    if kind == "sqlite":
        return hashlib.sha256(Path(target).read_bytes()).hexdigest(), Path(target + "-wal").exists()
    tables = [t for (t,) in pg.app_rows(target, "SELECT tablename FROM pg_tables WHERE schemaname = 'tinystore'")]
    return sorted(tables), {t: rows(kind, target, t, pg) for t in ("migrations", "release", "jobs")}


@BACKENDS
def test_a_store_of_a_later_release_is_refused_naming_its_schema_version_and_left_untouched(
        kind: str, tmp_path: Path, pg: kits.PostgresKit) -> None:
    target = str(tmp_path / "store.db") if kind == "sqlite" else pg.new_target()
    store = tinystore.open(target)
    store.queue("work").add({"n": 1}, id="kept:1")
    store.close()
    later = NEWEST[kind] + 1  # what a later release's migration leaves
    if kind == "sqlite":
        with sqlite3.connect(target) as conn:
            conn.execute("INSERT INTO tinystore_migrations (version) VALUES (?)", (later,))
        conn.close()
    else:
        pg.app_rows(target, f"INSERT INTO tinystore.migrations (version) VALUES ({later}) RETURNING version")
    before = snapshot(kind, target, pg)
    with pytest.raises(tinystore.Error) as refused:
        tinystore.open(target)
    assert f"has schema version {later}, from a later release of tinystore" in str(refused.value)
    assert f"this release ({tinystore.__version__}) knows schema versions up to {NEWEST[kind]}" in str(
        refused.value)
    assert snapshot(kind, target, pg) == before


SERVE_AT_ONCE = textwrap.dedent("""
    import sqlite3, sys, time
    import tinystore
    store = tinystore.open(sys.argv[1])
    deploy = store.queue("deploy")

    @deploy.work
    def work(payload, run):
        time.sleep(0.05)
        with sqlite3.connect(sys.argv[2], timeout=30) as witness:  # every run, however it ends
            witness.execute("INSERT INTO runs VALUES (?, ?)", (payload["n"], tinystore.__version__))
        witness.close()

    print("ready", flush=True)
    sys.stdin.readline()
    store.run_until_idle()
    store.close()
    print("served", flush=True)
""")


@BACKENDS
def test_processes_of_0_1_0_and_this_release_serve_one_store_at_once_each_job_once(
        kind: str, tmp_path: Path, pg: kits.PostgresKit) -> None:
    target = store_of_0_1_0(kind, tmp_path, pg)
    store = tinystore.open(target)  # this release migrates the store first, as a rolling deploy's first process
    store.queue("deploy").add_many([{"n": n} for n in range(80)])
    store.close()
    witness = tmp_path / "witness.db"
    with sqlite3.connect(witness) as conn:
        conn.execute("CREATE TABLE runs (n INTEGER, release TEXT)")
    conn.close()
    script = tmp_path / "serve.py"
    script.write_text(SERVE_AT_ONCE)
    pythons = [venvs.python_with(WHEEL_0_1_0, "postgres"), Path(sys.executable)] * 2
    # -I: each process imports its own release's tinystore, whatever the folder or PYTHONPATH
    children = [subprocess.Popen([str(python), "-I", str(script), target, str(witness)], cwd=tmp_path,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for python in pythons]
    for child in children:
        assert child.stdout.readline() == "ready\n", child.stderr.read()
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes = [child.communicate(timeout=120) for child in children]
    assert [out for out, _ in outcomes] == ["served\n"] * 4, [err for _, err in outcomes]
    with sqlite3.connect(witness) as conn:
        runs = conn.execute("SELECT n, release FROM runs").fetchall()
    conn.close()
    assert Counter(n for n, _ in runs) == Counter(range(80))  # every job once: none lost, none run twice
    assert {release for _, release in runs} == {"0.1.0", tinystore.__version__}
