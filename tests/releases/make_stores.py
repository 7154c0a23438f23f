"""Make the stores of release 0.1.0 that tests/test_releases.py opens with this release: run by the python
of a venv where tests/releases/tinystore-0.1.0-py3-none-any.whl is installed.

    python make_stores.py FOLDER [POSTGRES_SERVER_URL]

writes FOLDER/store.db (SQLite) and FOLDER/store.pg.sql (pg_dump of the schema ``tinystore``, plain SQL),
each with jobs in every state:

- queue ``work`` (done jobs kept 10 years): ``done:1..3`` done; ``waiting:1..3`` waiting;
  ``scheduled:1`` scheduled in 2100; ``cancelled:1`` cancelled;
- queue ``held``: ``running:1`` running, its lease held by a process that died while its handler ran;
- queue ``failing`` (one attempt, failed jobs kept 10 years): ``failed:1`` failed.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone

import tinystore

TEN_YEARS = "3650d"


def fill(target: str) -> None:
    store = tinystore.open(target)
    work = store.queue("work", dedupe=TEN_YEARS, keep=TEN_YEARS)
    failing = store.queue("failing", attempts=1, keep=TEN_YEARS)
    for n in (1, 2, 3):
        work.add({"n": n}, id=f"done:{n}")

    @work.work
    def done(payload, run):
        pass

    @failing.work
    def fail(payload, run):
        raise RuntimeError("failed in 0.1.0")

    failing.add({"n": 1}, id="failed:1")
    store.run_until_idle()
    store.close()
    store = tinystore.open(target)  # no handlers: what is added now stays as it is
    work = store.queue("work")
    for n in (1, 2, 3):
        work.add({"n": n}, id=f"waiting:{n}")
    work.add({"n": 1}, id="scheduled:1", at=datetime(2100, 1, 1, tzinfo=timezone.utc))
    work.add({"n": 1}, id="cancelled:1")
    assert work.cancel("cancelled:1")
    store.queue("held").add({"n": 1}, id="running:1")
    store.close()
    # A process that dies in the handler of running:1, its lease left in the store.
    subprocess.run([sys.executable, __file__, "--die", target], check=False)


def die(target: str) -> None:
    store = tinystore.open(target)

    @store.queue("held").work
    def work(payload, run):
        os._exit(0)

    store.run_until_idle()


def main(folder: str, server: str = "postgresql://postgres@127.0.0.1:5432/postgres") -> None:
    path = os.path.join(folder, "store.db")
    fill(path)
    with sqlite3.connect(path) as conn:  # the dead process's WAL into the file: one file to keep
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.remove(path + "-tinystore.lock")
    database = "tinystore_release_0_1_0"
    admin = server.rsplit("/", 1)[0]
    subprocess.run(["psql", server, "-qc", f"DROP DATABASE IF EXISTS {database}"], check=True)
    subprocess.run(["psql", server, "-qc", f"CREATE DATABASE {database}"], check=True)
    try:
        fill(f"{admin}/{database}")
        subprocess.run(["pg_dump", "--schema=tinystore", "--no-owner", "--no-privileges",
                        "--file", os.path.join(folder, "store.pg.sql"), f"{admin}/{database}"], check=True)
    finally:
        subprocess.run(["psql", server, "-qc", f"DROP DATABASE {database} WITH (FORCE)"], check=True)


if __name__ == "__main__":
    if sys.argv[1] == "--die":
        die(sys.argv[2])
    else:
        main(*sys.argv[1:])
