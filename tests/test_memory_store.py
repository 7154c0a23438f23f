"""``tinystore.open(":memory:")``, a store for tests, and ``sqlite:///`` URLs (SPEC §17).

A store in memory leaves no file in the working folder: it is a file in a
private folder under the temporary folder (here one of the test's own, set
as ``tempfile.tempdir``, so the test sees it come and go), removed at
``close``. A ``sqlite:///`` URL names a file as SQLAlchemy does.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

import tinystore

IN_MEMORY = [":memory:", "sqlite://", "sqlite:///:memory:"]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The working folder, empty; the temporary folder is ``tmp_path / "tmp"``."""
    work, temp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    temp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    yield work


def temporary(here: Path) -> list[Path]:
    """Everything under the temporary folder."""
    return sorted((here.parent / "tmp").rglob("*"))


@pytest.mark.parametrize("target", IN_MEMORY)
def test_a_store_in_memory_runs_jobs_leaves_no_file_in_the_working_folder_and_close_removes_everything(
        here: Path, target: str) -> None:
    store = tinystore.open(target)
    assert store.location == ":memory:"
    mail = store.queue("mail", dedupe="1h")
    sent: list[Any] = []
    mail.work(lambda payload, run: sent.append(payload))
    mail.add({"to": "ann"}, id="m1")
    store.run_until_idle()
    assert sent == [{"to": "ann"}] and mail.get("m1").state == "done"
    assert os.listdir(here) == []
    assert [p.name for p in temporary(here) if p.is_dir()] != []  # it lives in the temporary folder
    store.close()
    assert temporary(here) == [] and os.listdir(here) == []


def test_a_worker_of_the_same_process_serves_a_store_in_memory(here: Path) -> None:
    store = tinystore.open(":memory:")
    done = threading.Event()
    mail = store.queue("mail")
    mail.work(lambda payload, run: done.set())
    store.start(workers=1)
    try:
        mail.add({"to": "bob"})
        assert done.wait(30), "the worker ran the job"
    finally:
        store.close()
    assert temporary(here) == [] and os.listdir(here) == []


def test_each_open_of_memory_is_a_store_of_its_own(here: Path) -> None:
    first, second = tinystore.open(":memory:"), tinystore.open(":memory:")
    first.queue("mail").add({}, id="only-here")
    assert second.queues() == [] and first.queue("mail").get("only-here") is not None
    first.close()
    assert second.queues() == []
    second.close()
    assert temporary(here) == []


def test_a_sqlite_url_with_three_slashes_names_a_file_of_the_working_folder_and_four_an_absolute_path(
        here: Path, tmp_path: Path) -> None:
    with tinystore.open("sqlite:///app.db") as store:
        store.queue("mail").add({}, id="relative")
    elsewhere = tmp_path / "elsewhere.db"
    with tinystore.open(f"sqlite:///{elsewhere}") as store:  # sqlite:////abs/path
        store.queue("mail").add({}, id="absolute")
    assert (here / "app.db").is_file() and not (here / "sqlite:").exists()
    for path, id in ((here / "app.db", "relative"), (elsewhere, "absolute")):
        conn = sqlite3.connect(path)
        assert conn.execute("SELECT id FROM tinystore_jobs").fetchall() == [(id,)]
        conn.close()
        with tinystore.open(path) as store:  # the URL and the path are the same store
            assert store.queue("mail").get(id) is not None


@pytest.mark.parametrize("url", ["sqlite://host/app.db", "sqlite:///app.db?mode=ro", "sqlite:///"])
def test_a_sqlite_url_with_a_host_or_a_query_or_no_path_is_refused_saying_what_one_looks_like(
        here: Path, url: str) -> None:
    with pytest.raises(tinystore.InvalidArgument) as refused:
        tinystore.open(url)
    assert "sqlite:///app.db" in str(refused.value) and repr(url) in str(refused.value)
    assert os.listdir(here) == []


def test_the_command_line_refuses_a_store_in_memory_which_no_other_process_can_reach(here: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "tinystore.cli", "status", ":memory:"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert "':memory:' is a store in memory, which only the process that opened it can reach" in result.stderr
    assert os.listdir(here) == []
