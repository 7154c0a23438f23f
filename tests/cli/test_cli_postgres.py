"""The commands on a PostgreSQL store: ``tinystore status|jobs|show|retry|cancel|add|maintain URL`` and
``tinystore worker`` serving a store opened on a URL; ``--schema``; the refusals of what is not a store
(nothing created); ``check`` refusing a URL; a URL's password never printed.

Each test has a database of its own on the server of ``TINYSTORE_TEST_POSTGRES``
(default ``postgresql://postgres@127.0.0.1:5432/test``), made for it and dropped
after it. The store's URL carries a password (the server's own where its URL
has one, else one that trust authentication ignores), and every command's
output is checked for it. When the server cannot be reached the tests are
skipped, saying why; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

import tinystore
from clitools import App, one_error_line

SERVER = os.environ.get("TINYSTORE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
ADDED_PASSWORD = "s3cret-Pw"  # put in the URL where the server's URL has none: trust authentication ignores it
OPERATIONS = {  # every operations command, with the arguments after STORE
    "status": [], "jobs": ["echo"], "show": ["echo", "e1"], "retry": ["echo", "e1"], "cancel": ["echo", "e1"],
    "add": ["echo", "{}"], "maintain": [],
}


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def with_password(url: str) -> tuple[str, str]:
    """``url`` with a password in it, and that password."""
    found = re.match(r"^(postgres(?:ql)?://)([^:@/?]*)(?::([^@/?]*))?@", url)
    if found and found.group(3):
        return url, found.group(3)
    if found:
        return url.replace("@", f":{ADDED_PASSWORD}@", 1), ADDED_PASSWORD
    scheme, rest = url.split("://", 1)
    return f"{scheme}://postgres:{ADDED_PASSWORD}@{rest}", ADDED_PASSWORD


@pytest.fixture(scope="session")
def server() -> Any:
    """psycopg, once the server of TINYSTORE_TEST_POSTGRES answered."""
    try:
        import psycopg
    except ImportError as exc:
        _unavailable(f"the PostgreSQL tests need psycopg 3 ({exc})")
    try:
        psycopg.connect(SERVER, connect_timeout=3).close()
    except psycopg.Error as exc:
        shown = re.sub(r"://([^:/@]*):[^@/]*@", r"://\1@", SERVER)
        _unavailable(f"the PostgreSQL server of TINYSTORE_TEST_POSTGRES ({shown}) cannot be reached: "
                     f"{' '.join(str(exc).split())}")
    return psycopg


class PgApp(App):
    """The test's folder (see clitools.App) whose store is a database made for the test: ``db`` is its URL,
    with a password that no command may print."""

    def __init__(self, folder: Path, psycopg: Any):
        super().__init__(folder)
        self.psycopg = psycopg
        self.dbname = f"ts_{secrets.token_hex(6)}"
        self.admin(f"CREATE DATABASE {self.dbname}")
        self.db, self.password = with_password(SERVER.rsplit("/", 1)[0] + "/" + self.dbname)
        self.shown = re.sub(r"://([^:/@]*):[^@/]*@", r"://\1@", self.db)  # what the commands print
        params = psycopg.conninfo.conninfo_to_dict(SERVER)
        self.hostport = f"{params.get('host') or 'localhost'}:{params.get('port') or '5432'}"
        self.env["TINYSTORE_TEST_DB"] = self.db

    def cli(self, *args: str, input: Optional[str] = None) -> subprocess.CompletedProcess:
        return self.unseen(super().cli(*args, input=input))

    def cli_all(self, *commands: list[str]) -> list[subprocess.CompletedProcess]:
        return [self.unseen(result) for result in super().cli_all(*commands)]

    def unseen(self, result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
        assert self.password not in result.stdout + result.stderr, result
        return result

    def rows(self, sql: str, params: Any = None, dbname: Optional[str] = None) -> list[tuple]:
        url = SERVER if dbname == "" else self.db
        with self.psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description is not None else []

    def others_registered(self, schema: str = "tinystore") -> list[tuple]:
        """The processes registered in the store, other than the test's own."""
        return self.rows(f"SELECT pid, host FROM {schema}.processes WHERE pid <> %s", (os.getpid(),))

    def drop(self) -> None:
        self.admin(f"DROP DATABASE IF EXISTS {self.dbname} WITH (FORCE)")

    def admin(self, sql: str) -> None:
        """``sql`` on the server's own database, tried again where another test's outage ended the session
        (tests elsewhere terminate backends) or a session in template1 held up CREATE DATABASE a moment."""
        for attempt in range(20):
            try:
                with self.psycopg.connect(SERVER, autocommit=True) as conn:
                    conn.execute(sql)
                return
            except (self.psycopg.OperationalError, self.psycopg.errors.ObjectInUse):
                if attempt == 19:
                    raise
                time.sleep(0.25)


@pytest.fixture
def pg_app(tmp_path: Path, server: Any) -> Iterator[PgApp]:
    app = PgApp(tmp_path, server)
    try:
        yield app
    finally:
        try:
            for worker in app.workers:
                for line in worker.err:
                    assert app.password not in line, line
                for line in worker.out:
                    assert app.password not in line, line
        finally:
            app.close()
            app.drop()


def mail_queue(app: App) -> tinystore.Store:
    """The store, with a mail queue holding a job in each state: done, failed, two waiting, one scheduled."""
    store = app.open()
    mail = store.queue("mail", attempts=1, dedupe="1h")

    @mail.work
    def send(payload: dict, run: tinystore.Run) -> None:
        run.step("lookup", lambda: {"mailbox": payload.get("to")})
        if payload.get("fail"):
            raise ValueError("no such mailbox")

    mail.add({"to": "a"}, id="m1")
    mail.add({"to": "b", "fail": True}, id="m2")
    store.run_until_idle()
    mail.add({}, id="m3", group="g")
    mail.add({}, id="m4")
    mail.add({}, id="m5", delay="10m")
    return store


# The commands that read

def test_status_jobs_and_show_read_a_postgres_store_and_leave_no_registration_behind(pg_app: PgApp) -> None:
    mail_queue(pg_app)
    db = pg_app.db
    status, table, jobs, page, show, shown = pg_app.cli_all(
        ["status", db, "--json"], ["status", db], ["jobs", db, "mail", "--json"],
        ["jobs", db, "mail", "--state", "waiting", "--limit", "1"], ["show", db, "mail", "m2", "--json"],
        ["show", db, "mail", "m1"])
    for result in (status, table, jobs, page, show, shown):
        assert (result.returncode, result.stderr) == (0, ""), result

    data = json.loads(status.stdout)
    assert data["store"] == pg_app.shown and data["store"].startswith("postgresql://")
    mail = data["queues"]["mail"]
    assert {state: mail[state] for state in ("scheduled", "waiting", "running", "done", "failed")} == {
        "scheduled": 1, "waiting": 2, "running": 0, "done": 1, "failed": 1}
    assert (mail["started_last_minute"], mail["done_last_minute"], mail["failed_last_minute"]) == (2, 1, 1)

    lines = table.stdout.splitlines()
    assert lines[0] == f"store {pg_app.shown}"
    assert next(line for line in lines if line.startswith("mail ")).split()[:6] == ["mail", "1", "2", "0", "1", "1"]

    listed = json.loads(jobs.stdout)
    assert [(j["id"], j["state"]) for j in listed["jobs"]] == [
        ("m1", "done"), ("m2", "failed"), ("m3", "waiting"), ("m4", "waiting"), ("m5", "scheduled")]
    assert page.stdout.splitlines()[1].split()[:2] == ["m3", "waiting"] and "more: --after m3" in page.stdout

    detail = json.loads(show.stdout)
    assert (detail["state"], detail["payload"], detail["steps"]) == (
        "failed", {"to": "b", "fail": True}, [{"name": "lookup", "attempt": 1, "answer": {"mailbox": "b"}}])
    assert "ValueError: no such mailbox" in detail["error"]
    assert "payload   {\"to\": \"a\"}" in shown.stdout and "state     done" in shown.stdout

    assert pg_app.others_registered() == []  # each command's registration was removed by its close


# The commands that write

def test_retry_cancel_add_and_maintain_change_a_postgres_store(pg_app: PgApp) -> None:
    store = mail_queue(pg_app)
    mail = store.queue("mail")
    db = pg_app.db

    retried = pg_app.cli("retry", db, "mail", "m2", "--json")
    assert (retried.returncode, json.loads(retried.stdout)["retried"]) == (0, True), retried
    again = pg_app.cli("retry", db, "mail", "m4")
    assert again.returncode == 1 and "is waiting, not failed: nothing to retry" in again.stderr

    cancelled = pg_app.cli("cancel", db, "mail", "m4")
    assert (cancelled.returncode, cancelled.stdout) == (0, "job m4 of queue mail was waiting: cancelled\n")
    assert pg_app.cli("cancel", db, "mail", "m1").returncode == 1  # done: nothing to cancel

    added = pg_app.cli("add", db, "mail", '{"to": "c"}', "--id", "m6", "--group", "g", "--json")
    assert added.returncode == 0, added.stderr
    assert (json.loads(added.stdout)["added"], json.loads(added.stdout)["state"]) == (True, "waiting")
    twice = pg_app.cli("add", db, "mail", "-", "--id", "m6", input='{"to": "d"}')
    assert twice.stdout == "job m6 is already in queue mail (waiting): nothing added\n"

    maintained = pg_app.cli("maintain", db, "--json")
    assert maintained.returncode == 0 and json.loads(maintained.stdout)["removed"] == 0, maintained

    m2, m4, m6 = mail.get("m2"), mail.get("m4"), mail.get("m6")
    assert (m2.state, m2.attempt) == ("waiting", 0)
    assert m4 is None or m4.state not in ("waiting", "scheduled", "running")
    assert (m6.payload, m6.group) == ({"to": "c"}, "g")
    assert pg_app.others_registered() == []


# --schema

def test_schema_names_where_the_tables_are_and_without_it_a_store_elsewhere_is_refused(pg_app: PgApp) -> None:
    store = tinystore.open(pg_app.db, schema="jobs_a")
    pg_app.stores.append(store)
    store.queue("echo").add({"n": 1}, id="e1")
    db = pg_app.db

    status, job, missing, named = pg_app.cli_all(
        ["status", db, "--schema", "jobs_a", "--json"], ["show", db, "echo", "e1", "--schema", "jobs_a"],
        ["status", db], ["status", db, "--schema", "jobs_b"])
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["store"] == f"{pg_app.shown} (schema jobs_a)"
    assert json.loads(status.stdout)["queues"]["echo"]["waiting"] == 1
    assert job.returncode == 0 and "payload   {\"n\": 1}" in job.stdout, job
    for result, schema in ((missing, "tinystore"), (named, "jobs_b")):
        assert (result.returncode, result.stdout) == (2, "")
        assert one_error_line(result) == (
            f"tinystore: error: database '{pg_app.dbname}' on the PostgreSQL server at {pg_app.hostport} has no "
            f"schema '{schema}': not a tinystore store (its schemas with tinystore's tables: jobs_a; name one "
            f"with --schema)")
    assert [name for (name,) in pg_app.rows("SELECT nspname FROM pg_namespace WHERE nspname IN "
                                            "('tinystore', 'jobs_b') ")] == []  # neither was created
    assert pg_app.others_registered("jobs_a") == []


def test_schema_is_refused_for_a_file_and_checked_as_a_name_for_a_url(app: App) -> None:
    app.open().queue("echo").add({}, id="e1")
    before = app.dump()
    results = app.cli_all(["status", app.db, "--schema", "jobs"], ["add", app.db, "echo", "{}", "--schema", "x"],
                          ["status", "postgresql://u@127.0.0.1:1/db", "--schema", "Bad-Name"])
    assert [r.returncode for r in results] == [2, 2, 2]
    assert one_error_line(results[0]) == (f"tinystore: error: --schema is for a postgresql:// URL, and {app.db} "
                                          f"is a SQLite file (one store, no schemas)")
    assert one_error_line(results[1]).startswith("tinystore: error: --schema is for a postgresql:// URL")
    assert one_error_line(results[2]) == "tinystore: error: schema 'Bad-Name' must match [a-z_][a-z0-9_]{0,62}"
    assert app.dump() == before
    usage = app.cli("status", "--help").stdout
    assert "STORE" in usage and "a SQLite file or a postgresql:// URL" in usage and "--schema NAME" in usage


# What is not a store: refused, exit 2, one line, nothing created, no password

def run_each(app: PgApp, url: str, commands: list[str] = list(OPERATIONS)) -> set[str]:
    """Run each command on ``url`` at once; the lines they wrote on stderr, each having exited 2."""
    lines = set()
    for command, result in zip(commands, app.cli_all(*[[c, url, *OPERATIONS[c]] for c in commands])):
        assert (result.returncode, result.stdout) == (2, ""), (command, result)
        lines.add(one_error_line(result))
    return lines


def test_a_database_that_does_not_exist_is_refused_and_not_created(pg_app: PgApp) -> None:
    missing = f"ts_missing_{secrets.token_hex(4)}"
    url = pg_app.db.rsplit("/", 1)[0] + "/" + missing
    assert run_each(pg_app, url) == {
        f"tinystore: error: no database '{missing}' on the PostgreSQL server at {pg_app.hostport}: not a tinystore "
        f"store (a command never creates one)"}
    assert pg_app.rows("SELECT 1 FROM pg_database WHERE datname = %s", (missing,), dbname="") == []


def test_a_server_that_cannot_be_reached_is_refused_naming_host_and_database(pg_app: PgApp) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://postgres:{pg_app.password}@127.0.0.1:{port}/jobs?connect_timeout=5"
    lines = run_each(pg_app, url, ["status", "add", "maintain"])
    assert len(lines) == 1, lines
    line = lines.pop()
    assert line.startswith(f"tinystore: error: cannot connect to database 'jobs' on the PostgreSQL server at "
                           f"127.0.0.1:{port}: "), line
    assert "refused" in line.lower(), line


def test_a_schema_without_tinystore_tables_is_refused_and_left_as_it_was(pg_app: PgApp) -> None:
    pg_app.rows("CREATE SCHEMA tinystore")
    pg_app.rows("CREATE TABLE tinystore.notes (body text)")
    pg_app.rows("INSERT INTO tinystore.notes VALUES ('hello')")
    pg_app.rows("CREATE SCHEMA other")  # and one that holds a table called migrations, of someone else's
    pg_app.rows("CREATE TABLE other.migrations (version int)")
    assert run_each(pg_app, pg_app.db) == {
        f"tinystore: error: database '{pg_app.dbname}' on the PostgreSQL server at {pg_app.hostport} has no "
        f"tinystore tables in schema 'tinystore': not a tinystore store"}
    tables = pg_app.rows("SELECT table_schema, table_name FROM information_schema.tables "
                         "WHERE table_schema IN ('tinystore', 'other') ORDER BY 1, 2")
    assert tables == [("other", "migrations"), ("tinystore", "notes")]
    assert pg_app.rows("SELECT body FROM tinystore.notes") == [("hello",)]


def test_a_queue_or_job_the_store_does_not_keep_is_refused(pg_app: PgApp) -> None:
    pg_app.open().queue("echo").add({}, id="e2")
    db = pg_app.db
    results = pg_app.cli_all(["jobs", db, "nope"], ["add", db, "nope", "{}"], ["show", db, "echo", "e1"],
                             ["retry", db, "echo", "e1"])
    lines = [one_error_line(result) for result in results]
    assert lines[:2] == [f"tinystore: error: no queue named 'nope' in {pg_app.shown} "
                         f"(its queues: boom, echo, gated, hang)"] * 2
    assert lines[2:] == ["tinystore: error: no job 'e1' in queue 'echo'"] * 2
    assert [r.returncode for r in results] == [2, 2, 2, 2]
    assert pg_app.rows("SELECT name FROM tinystore.queues ORDER BY name") == [
        ("boom",), ("echo",), ("gated",), ("hang",)]


def test_a_url_that_cannot_be_read_is_refused_without_its_password(pg_app: PgApp) -> None:
    url = f"postgresql://postgres:{pg_app.password}@127.0.0.1:5432/db?no_such_option=1"
    lines = run_each(pg_app, url, ["status", "add"])
    assert lines == {"tinystore: error: the PostgreSQL URL postgresql://postgres@127.0.0.1:5432/db?no_such_option=1 "
                     "cannot be read: invalid URI query parameter: \"no_such_option\""}, lines
    bad = pg_app.cli("status", "postgresql://postgres:se%zz-pw@127.0.0.1:5432/db")  # libpq quotes the token
    assert one_error_line(bad) == ('tinystore: error: the PostgreSQL URL postgresql://postgres@127.0.0.1:5432/db '
                                   'cannot be read: invalid percent-encoded token: "***"')


def test_check_refuses_a_url_saying_it_checks_sqlite_files(pg_app: PgApp) -> None:
    pg_app.open()
    result = pg_app.cli("check", pg_app.db)
    assert (result.returncode, result.stdout) == (2, "")
    assert one_error_line(result) == (
        f"tinystore: error: tinystore check reads the pages of a SQLite store file, and {pg_app.shown} is a "
        f"PostgreSQL database: the server checks its own pages (enable data checksums; run pg_amcheck)")


def test_the_helper_shows_a_url_without_its_password() -> None:
    from tinystore.backends import scrubbed, shown
    assert shown("postgresql://user:secret@host/db") == "postgresql://user@host/db"
    assert shown("postgres://user:s@cr:et@host:5433/db?sslmode=require&password=x") == (
        "postgres://user@host:5433/db?sslmode=require")
    assert shown("postgresql://host/db?password=x&application_name=a") == "postgresql://host/db?application_name=a"
    assert shown("postgresql://:secret@host/db") == "postgresql://host/db"
    assert shown("postgresql://user@host/db") == "postgresql://user@host/db"
    assert shown("/var/lib/app/jobs.db") == "/var/lib/app/jobs.db"
    assert scrubbed('bad token "se%zz" in postgresql://u:se%zz@h/db', "postgresql://u:se%zz@h/db") == (
        'bad token "***" in postgresql://u@h/db')
    assert scrubbed("no such file: jobs.db", "jobs.db") == "no such file: jobs.db"


# tinystore worker

def test_a_worker_serves_a_store_opened_on_a_url_until_sigterm(pg_app: PgApp) -> None:
    echo = pg_app.open().queue("echo")
    echo.add({}, id="e1")
    worker = pg_app.serving("--queues", "echo")
    started = worker.wait_for("INFO tinystore.cli: worker", "err")
    assert f"worker {worker.pid} started on {pg_app.shown}: queues echo," in started, started
    worker.wait_for("ran echo e1 1")

    added = pg_app.cli("add", pg_app.db, "echo", '{"n": 2}', "--id", "e2")
    assert added.returncode == 0, added.stderr
    assert pg_app.cli("add", pg_app.db, "gated", "{}", "--id", "g1").returncode == 0  # not a queue it serves
    worker.wait_for("ran echo e2 1")

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    worker.wait_for(f"worker {worker.pid} stopped", "err")
    assert pg_app.witnessed() == ["ran echo e1 1", "ran echo e2 1"]
    assert [(j.id, j.state, j.attempt) for j in echo.jobs()] == [("e1", "done", 1), ("e2", "done", 1)]
    gated = pg_app.open().queue("gated").get("g1")
    assert (gated.state, gated.attempt) == ("waiting", 0)
    assert pg_app.others_registered() == []  # the worker's registration went with its close


def test_sigterm_lets_a_running_handler_finish_on_a_postgres_store(pg_app: PgApp) -> None:
    gated = pg_app.open().queue("gated")
    for id in ("g1", "g2"):
        gated.add({}, id=id)
    worker = pg_app.serving("--workers", "1")
    worker.wait_for("started gated g1 1")
    running = pg_app.cli("show", pg_app.db, "gated", "g1", "--json")
    assert json.loads(running.stdout)["lease"]["pid"] == worker.pid, running

    worker.signal(signal.SIGTERM)
    worker.wait_for("SIGTERM: finishing running handlers", "err")
    pg_app.release()
    assert worker.wait() == 0
    assert pg_app.witnessed() == ["started gated g1 1", "finished gated g1 1"]
    assert [(gated.get(id).state, gated.get(id).attempt) for id in ("g1", "g2")] == [("done", 1), ("waiting", 0)]


def test_a_worker_whose_module_cannot_reach_the_store_is_refused_without_the_password(pg_app: PgApp) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pg_app.env["TINYSTORE_TEST_DB"] = f"postgresql://postgres:{pg_app.password}@127.0.0.1:{port}/jobs"
    worker = pg_app.worker()
    assert worker.wait() == 2
    last = [line for line in worker.err if line][-1]
    assert last.startswith("tinystore: error: cannot import app_jobs: Error: cannot connect to the PostgreSQL "
                           f"server at 127.0.0.1:{port}, database 'jobs'"), worker.err


def test_a_worker_on_a_poolers_url_serves_with_direct_and_without_it_exits_1_naming_the_pooler(
        pg_app: PgApp) -> None:
    from pgbouncer import BINARY, PgBouncer  # tests/pgbouncer.py: PgBouncer in transaction pooling mode

    if not os.path.exists(BINARY):
        _unavailable(f"no pgbouncer at {BINARY} (set PGBOUNCER)")
    pooler = PgBouncer(pg_app.db)
    try:
        pg_app.env["TINYSTORE_TEST_DB"] = pooler.url.replace("://postgres@", f"://postgres:{pg_app.password}@")
        refused = pg_app.worker("--queues", "echo")
        assert refused.wait() == 1
        last = [line for line in refused.err if line][-1]
        assert f"worker {refused.pid} stopped: the store's URL reaches 127.0.0.1:{pooler.port}, database " \
               f"'{pg_app.dbname}', through a connection pooler: workers and watches need a session of their " \
               f"own on the server" in last, refused.err
        assert pg_app.others_registered() == []

        pg_app.env["TINYSTORE_TEST_DIRECT"] = pg_app.db
        worker = pg_app.serving("--queues", "echo")
        added = pg_app.cli("add", pooler.url, "echo", "{}", "--id", "e1")  # through the pooler too
        assert added.returncode == 0, added.stderr
        worker.wait_for("ran echo e1 1")
        assert [pid for pid, host in pg_app.others_registered()] == [worker.pid]
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0
        assert pg_app.witnessed() == ["ran echo e1 1"]
        assert pg_app.others_registered() == []
    finally:
        pooler.close()


def test_a_url_spelled_out_in_the_applications_source_is_not_printed_in_its_traceback(pg_app: PgApp) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://postgres:{pg_app.password}@127.0.0.1:{port}/jobs"
    (pg_app.folder / "inline_app.py").write_text(f"import tinystore\n\nstore = tinystore.open({url!r})\n")
    worker = pg_app.worker(target="inline_app:store")
    assert worker.wait() == 2
    text = "\n".join(worker.err)
    assert pg_app.password not in text, text
    assert f"store = tinystore.open('postgresql://postgres@127.0.0.1:{port}/jobs')" in text, text
    assert [line for line in worker.err if line][-1].startswith("tinystore: error: cannot import inline_app: "), text
