"""Do other processes' opens and worker starts slow a worker's writes on PostgreSQL? (docs/reliability.md, 5)

    PYTHONPATH=src python tests/soak/pg_starts.py [--server postgresql://postgres@127.0.0.1:5432/] FOLDER

In a database of its own (dropped at the end): first, with one session holding ROW EXCLUSIVE on every
table of the store (what every INSERT, UPDATE and DELETE takes), a process opens the store and serves for
2 s: an open or a start that needs a lock writers hold would wait for it (lock_timeout 5 s) and fail.
Then a worker process runs 4 ``def`` handlers doing ``run.step`` in a loop, each step timed, while
another thread of it records how late its sleeps wake (its share of the CPU). Meanwhile, one after the
other, with 5 s of nothing between:

  idle     10 s of nothing
  import   10 processes: python -c "import tinystore, psycopg, psycopg_pool"
  open     1 process opening and closing the store 10 times
  opens    10 processes, each opening the store once
  worker   10 processes, each starting a worker on an idle queue for 2 s
  claimer  10 times: 100 jobs added, then a process serving them (3 steps each) for 2 s
  replace  5 times: a process holding 16 leases is killed, and one that serves the queue starts
           (its registration finds the killed one dead and ends its leases)

It prints the steps' durations by phase (median, 90th percentile, most).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid

import psycopg

PY = sys.executable

OPEN_ONE = "import sys, tinystore; s = tinystore.open(sys.argv[1]); s.close()"
OPEN_TEN = ("import sys, time, tinystore\n"
            "for i in range(10):\n"
            "    s = tinystore.open(sys.argv[1]); s.close(); time.sleep(0.5)\n")
WORKER = ("import sys, time, tinystore\n"
          "s = tinystore.open(sys.argv[1]); q = s.queue('idle', lease='2s')\n"
          "q.work(lambda p, run: None); s.start(); time.sleep(2); s.stop(); s.close()\n")
CLAIMER = ("import sys, time, tinystore\n"
           "s = tinystore.open(sys.argv[1]); q = s.queue('b', lease='2s')\n"
           "def h(p, run):\n"
           "    for i in range(3): run.step(f's{i}', lambda: i)\n"
           "q.work(h); s.start(workers=16); time.sleep(2); s.stop(); s.close()\n")
HOLDER = ("import sys, time, tinystore\n"
          "s = tinystore.open(sys.argv[1]); q = s.queue('b', lease='30s')\n"
          "def h(p, run): time.sleep(60)\n"
          "q.work(h); s.start(workers=16); print('up', flush=True); time.sleep(600)\n")
BESIDE_LOCKS = ("import sys, time, tinystore\n"
                "t = time.time(); s = tinystore.open(sys.argv[1], lock_timeout=5)\n"
                "q = s.queue('idle'); q.work(lambda p, run: None); s.start(); time.sleep(2); s.stop(); s.close()\n"
                "print(f'beside ROW EXCLUSIVE on every table: open, 2 s of serving, close in {time.time() - t:.2f}s')\n")


def writer(url: str, out: str, seconds: float) -> None:
    """4 handlers doing steps in a loop for ``seconds``; each step's start and duration as a line of ``out``."""
    import tinystore
    store = tinystore.open(url)
    q = store.queue("w", lease="2s", timeout=None)
    end = time.time() + seconds
    lock = threading.Lock()
    f = open(out, "a")

    def record(t: float, took: float, what: str) -> None:
        with lock:
            f.write(json.dumps([t, took, what]) + "\n")
            f.flush()

    def handler(payload, run):
        i = 0
        while time.time() < end:
            t = time.time()
            run.step(f"s{i}", lambda: i)
            record(t, time.time() - t, "step")
            i += 1
            time.sleep(0.02)

    def late() -> None:
        while time.time() < end:
            t = time.time()
            time.sleep(0.01)
            if time.time() - t - 0.01 > 0.05:
                record(t, time.time() - t - 0.01, "late")

    threading.Thread(target=late, daemon=True).start()
    q.work(handler)
    for n in range(4):
        q.add(n, id=f"h{n}")
    store.start(workers=4)
    time.sleep(seconds + 1)
    store.stop()
    store.close()


def run_each(code: str, url: str, n: int = 10) -> None:
    for _ in range(n):
        subprocess.run([PY, "-c", code, url], check=True)


def add(url: str, n: int) -> None:
    subprocess.run([PY, "-c", f"import sys, tinystore; s = tinystore.open(sys.argv[1]);"
                    f" s.queue('b').add_many(list(range({n}))); s.close()", url], check=True)


def claimers(url: str) -> None:
    for _ in range(10):
        add(url, 100)
        subprocess.run([PY, "-c", CLAIMER, url], check=True)


def replace(url: str) -> None:
    for _ in range(5):
        add(url, 16)
        holder = subprocess.Popen([PY, "-c", HOLDER, url], stdout=subprocess.PIPE, text=True)
        holder.stdout.readline()
        time.sleep(1.5)  # its handlers hold their leases
        holder.kill()
        holder.wait()
        subprocess.run([PY, "-c", CLAIMER, url], check=True)


def beside_locks(url: str) -> None:
    with psycopg.connect(url) as conn:
        tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'tinystore'")]
        conn.execute("LOCK TABLE " + ", ".join(f"tinystore.{t}" for t in tables) + " IN ROW EXCLUSIVE MODE")
        subprocess.run([PY, "-c", BESIDE_LOCKS, url], check=True, timeout=60)
        conn.rollback()


def report(folder: str) -> None:
    phases = json.load(open(os.path.join(folder, "phases.json")))
    lines = [json.loads(line) for line in open(os.path.join(folder, "steps.jsonl"))]
    for name, t0, t1 in phases:
        d = sorted(took for t, took, what in lines if t0 <= t < t1 and what == "step")
        late = [took for t, took, what in lines if t0 <= t < t1 and what == "late"]
        print(f"{name:8s} steps {len(d):5d}  median {statistics.median(d) * 1000:5.0f} ms  "
              f"p90 {d[int(len(d) * 0.9)] * 1000:5.0f} ms  most {d[-1] * 1000:5.0f} ms  "
              f"woke >50 ms late {len(late)}x (most {max(late, default=0) * 1000:.0f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/")
    parser.add_argument("folder")
    args = parser.parse_args()
    os.makedirs(args.folder, exist_ok=True)
    db = f"ts_starts_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.server + "postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{db}"')
    url = args.server + db
    steps = os.path.join(args.folder, "steps.jsonl")
    try:
        subprocess.run([PY, "-c", OPEN_ONE, url], check=True)  # the migrations, once
        beside_locks(url)
        w = subprocess.Popen([PY, __file__, "--writer", url, steps])
        time.sleep(8)  # it starts and its handlers begin
        phases: list = []
        for name, fn in [("idle", lambda: time.sleep(10)),
                         ("import", lambda: run_each("import tinystore, psycopg, psycopg_pool", url)),
                         ("open", lambda: subprocess.run([PY, "-c", OPEN_TEN, url], check=True)),
                         ("opens", lambda: run_each(OPEN_ONE, url)),
                         ("worker", lambda: run_each(WORKER, url)),
                         ("claimer", lambda: claimers(url)), ("replace", lambda: replace(url))]:
            t0 = time.time()
            fn()
            phases.append((name, t0, time.time()))
            time.sleep(5)
        with open(os.path.join(args.folder, "phases.json"), "w") as f:
            json.dump(phases, f)
        w.terminate()
        w.wait()
    finally:
        with psycopg.connect(args.server + "postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    report(args.folder)


if __name__ == "__main__":
    if sys.argv[1] == "--writer":
        writer(sys.argv[2], sys.argv[3], 300)
    else:
        main()
