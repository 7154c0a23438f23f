"""The examples run as a reader would run them, in a process of their own."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_replies_example_tells_the_chapter_s_scenario_and_exits_0(tmp_path: Path) -> None:
    store_file = tmp_path / "replies.db"
    done = run_example("replies.py", str(store_file))
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    out = done.stdout
    timeline = [
        "message 41 inserted and reply:41 added in one transaction: waiting",
        "worker 1  claimed reply:41, attempt 1",
        "worker 1  asking the model about message 41",
        "worker 1  the step's answer is kept under the job",
        "app       SIGKILL worker 1",
        "worker 2  claimed reply:41, attempt 2",
        "worker 2  step 'answer' came back from attempt 1's checkpoint, the model was not asked",
        "worker 2  reply inserted into messages",
        "reply:41 is done",
        "the model was asked once; message 41 has 1 reply",
        "as the chapter tells it",
    ]
    positions = [out.find(line) for line in timeline]
    assert -1 not in positions, f"missing {timeline[positions.index(-1)]!r} in:\n{out}"
    assert positions == sorted(positions), f"the timeline is out of order:\n{out}"
    assert out.count("asking the model") == 1, out  # worker 2 never asked

    with closing(sqlite3.connect(store_file)) as conn:  # what the example left in its store file
        assert conn.execute("SELECT body, reply_to FROM messages ORDER BY id").fetchall() == [
            ("Are you open on Sunday?", None), ("Yes, we are open on Sunday from 10:00 to 16:00.", 41)]


def test_replies_example_refuses_a_store_file_that_exists(tmp_path: Path) -> None:
    existing = tmp_path / "app.db"
    existing.write_bytes(b"")
    done = run_example("replies.py", str(existing))
    assert done.returncode == 2 and "exists" in done.stderr
    assert existing.read_bytes() == b""
