"""Bad input: each refusal exits 2 with one clear line on stderr, and changes nothing.

Each test runs every command it concerns at once, as separate processes.
"""

from __future__ import annotations

import os
import sqlite3

from clitools import App, one_error_line

# Every operations command, with the arguments after FILE.
OPERATIONS = {
    "status": [], "jobs": ["echo"], "show": ["echo", "e1"], "retry": ["echo", "e1"], "cancel": ["echo", "e1"],
    "add": ["echo", "{}"], "maintain": [],
}


def run_each(app: App, file: str, commands: list[str], queue: str | None = None) -> dict[str, str]:
    """Run each command on ``file``; return the one line each wrote on stderr, having exited 2."""
    args = [[command, file, *OPERATIONS[command]] for command in commands]
    if queue is not None:
        args = [[a[0], a[1], queue, *a[3:]] for a in args]
    lines = {}
    for command, result in zip(commands, app.cli_all(*args)):
        assert result.returncode == 2, (command, result)
        assert result.stdout == "", (command, result.stdout)
        lines[command] = one_error_line(result)
    return lines


def test_a_file_that_does_not_exist_is_refused_and_not_created(app: App) -> None:
    missing = str(app.folder / "missing.db")
    lines = run_each(app, missing, list(OPERATIONS))
    assert set(lines.values()) == {f"tinystore: error: no such file: {missing}"}, lines
    assert sorted(os.listdir(app.folder)) == ["app_jobs.py"]


def test_a_file_that_is_not_a_sqlite_database_is_refused_and_left_as_it_was(app: App) -> None:
    text = app.folder / "notes.txt"
    text.write_text("not a database\n")
    lines = run_each(app, str(text), ["status", "add", "maintain"])  # every command opens files alike
    assert set(lines.values()) == {f"tinystore: error: {text} is not a tinystore store: it is not a SQLite database"}
    assert text.read_text() == "not a database\n"
    assert sorted(os.listdir(app.folder)) == ["app_jobs.py", "notes.txt"]


def test_a_sqlite_database_without_tinystore_tables_is_refused_and_left_as_it_was(app: App) -> None:
    other = str(app.folder / "other.db")
    conn = sqlite3.connect(other)
    conn.execute("create table notes (body text)")
    conn.execute("insert into notes values ('hello')")
    conn.commit()
    conn.close()
    before = app.dump(other)
    lines = run_each(app, other, ["status", "add", "maintain"])
    assert set(lines.values()) == {f"tinystore: error: {other} is not a tinystore store: it has no tinystore tables"}
    assert app.dump(other) == before
    assert sorted(os.listdir(app.folder)) == ["app_jobs.py", "other.db"]


def test_a_queue_the_store_does_not_keep_is_refused_and_not_created(app: App) -> None:
    app.open().queue("echo").add({}, id="e1")
    before = app.dump()
    lines = run_each(app, app.db, ["jobs", "show", "retry", "cancel", "add"], queue="nope")
    expected = f"tinystore: error: no queue named 'nope' in {app.db} (its queues: boom, echo, gated, hang)"
    assert set(lines.values()) == {expected}, lines
    assert app.dump() == before


def test_a_job_the_queue_does_not_keep_is_refused(app: App) -> None:
    app.open().queue("echo").add({}, id="e2")
    before = app.dump()
    lines = run_each(app, app.db, ["show", "retry", "cancel"])
    assert set(lines.values()) == {"tinystore: error: no job 'e1' in queue 'echo'"}, lines
    assert app.dump() == before


def test_add_refuses_a_bad_payload_or_option_and_adds_nothing(app: App) -> None:
    app.open().queue("echo")
    before = app.dump()
    results = app.cli_all(["add", app.db, "echo", '{"to": '],
                          ["add", app.db, "echo", "{}", "--delay", "soon"],
                          ["add", app.db, "echo", "{}", "--id", ""])
    results.append(app.cli("add", app.db, "echo", "-", input='"' + "x" * (1024 * 1024) + '"'))
    lines = [one_error_line(result) for result in results]
    assert lines[0] == ("tinystore: error: the payload is not JSON: "
                        "Expecting value: line 1 column 8 (char 7)")
    assert lines[1].startswith("tinystore: error: delay 'soon' is not a duration")
    assert lines[2].startswith("tinystore: error: id ")
    assert lines[3].startswith("tinystore: error: payload ")
    assert all(result.returncode == 2 for result in results)
    assert app.dump() == before


def test_a_usage_error_is_one_line_too(app: App) -> None:
    result = app.cli("jobs", app.db, "echo", "--limit", "many")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "tinystore jobs: error: argument --limit: invalid int value: 'many' (see tinystore jobs --help)"]
