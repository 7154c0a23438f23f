"""``tinystore maintain FILE``: what is past keep and dedupe leaves the file; progress shows on a terminal only."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time

import tinystore
from clitools import TIMEOUT, App
from tinystore.testing import FakeClock

JOBS = 1100  # more than two batches of 500


def expired_jobs(app: App) -> None:
    """JOBS done jobs kept for one second, an hour ago: past dedupe now."""
    clock = FakeClock(start=time.time() - 3600)
    store = tinystore.open(app.db, clock=clock)
    app.stores.append(store)
    old = store.queue("old", dedupe="1s")

    @old.work
    async def nothing(payload: int, run: tinystore.AsyncRun) -> None:
        return None

    old.add_many(range(JOBS))
    store.run_until_idle()
    clock.advance("2s")
    assert len(old.jobs(limit=10_000)) == 0  # gone for get and jobs already (JOB-11), rows still in the file
    assert store.query("select count(*) from tinystore_jobs where queue = 'old'") == [(JOBS,)]


def test_maintain_removes_the_jobs_past_dedupe_and_keep(app: App) -> None:
    expired_jobs(app)
    result = app.cli("maintain", app.db, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"removed": JOBS}
    assert result.stderr == ""  # not a terminal: no progress
    assert app.stores[0].query("select count(*) from tinystore_jobs where queue = 'old'") == [(0,)]

    again = app.cli("maintain", app.db)
    assert (again.returncode, again.stdout) == (0, "removed 0 done and failed jobs past dedupe and keep\n")


def test_maintain_shows_its_progress_on_a_terminal(app: App) -> None:
    expired_jobs(app)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tinystore.cli", "maintain", app.db], cwd=app.folder,
                            env=app.env, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child has ended and closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert proc.wait(TIMEOUT) == 0
    text = output.decode()
    assert "\rmaintain: removed 500 jobs" in text and "\rmaintain: removed 1000 jobs" in text
    assert f"\rmaintain: removed {JOBS} jobs" in text
    assert text.endswith(f"removed {JOBS} done and failed jobs past dedupe and keep\r\n")
