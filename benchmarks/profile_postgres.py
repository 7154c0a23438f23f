"""W3's path and W2's drain on PostgreSQL, instrumented: where the time goes.

    python benchmarks/profile_latency.py [--postgres ADMIN_URL] [--jobs 200]

One job every 20 ms into an idle worker in another process, as W3's
"other process" case, on a database made for the run and dropped after it. Both processes wrap the PostgreSQL backend's writer transactions,
every statement of tinystore's connections (``PgConn.execute``, named after
``queries.sql``) and the keeper's hearing of a notice, with ``time.time()``.
Per job, from the ``add`` call: the add's transaction, the notice heard by
the worker, the claim's transaction (and each statement in it), the
handler's start. It prints the median of each and the median statement
times of the claim transaction. This is a measuring tool (docs/benchmarks.md
quotes it), not part of ``run.py``.
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
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import QUEUE, PostgresTarget  # noqa: E402

EVENTS: list[tuple] = []


def instrument() -> None:
    """Record every writer transaction, statement and notice heard in EVENTS: (kind, t0, t1, detail)."""
    from tinystore.backends.postgres import _connection, _keeper, _writer

    names: dict[str, str] = {}

    def name_of(q: Any, sql: str) -> str:
        if not names:
            names.update({v: k for k, v in vars(q).items() if isinstance(v, str)})
        return names.get(sql) or " ".join(sql.split()[:3])

    execute = _connection.PgConn.execute

    def timed_execute(self: Any, sql: str, params: Any = None) -> Any:
        t0 = time.time()
        try:
            return execute(self, sql, params)
        finally:
            EVENTS.append(("sql", t0, time.time(), name_of(self.q, sql), threading.current_thread().name))

    transaction = _writer.Writer._transaction

    def timed_transaction(self: Any, conn: Any, batch: list, stage: list) -> Any:
        t0 = time.time()
        try:
            return transaction(self, conn, batch, stage)
        finally:
            EVENTS.append(("txn", t0, time.time(), len(batch), ""))

    heard = _keeper.Keeper._heard

    def timed_heard(self: Any, payload: str) -> None:
        EVENTS.append(("heard", time.time(), time.time(), payload, ""))
        heard(self, payload)

    _connection.PgConn.execute = timed_execute
    _writer.Writer._transaction = timed_transaction
    _keeper.Keeper._heard = timed_heard


def worker(url: str, out: str) -> None:
    import tinystore
    instrument()
    store = tinystore.open(url)
    starts: dict[int, float] = {}

    @store.queue(QUEUE).work
    async def handle(payload: Any, run: Any) -> None:
        starts[payload["n"]] = time.time()
        print(f"started {payload['n']}", flush=True)

    def stop_on_eof() -> None:
        sys.stdin.readline()
        with open(out, "w") as f:
            json.dump({"events": EVENTS, "starts": starts}, f)
        os._exit(0)

    threading.Thread(target=stop_on_eof, daemon=True).start()
    print("ready", flush=True)
    store.serve()


def same_process(target: PostgresTarget, jobs: int, interval: float) -> dict[str, Any]:
    """W3's same-process case instrumented: the adder and the worker share one store (and its writer)."""
    import tinystore
    instrument()
    url = target.new("profile-latency-same")
    store = tinystore.open(url)
    queue = store.queue(QUEUE)
    starts: dict[int, float] = {}
    cv = threading.Condition()

    @queue.work
    async def handle(payload: Any, run: Any) -> None:
        started = time.time()
        with cv:
            starts[payload["n"]] = started
            cv.notify_all()

    store.start()
    adds: dict[int, float] = {}
    try:
        for n in range(jobs + 1):
            t0 = time.time()
            queue.add({"n": n})
            adds[n] = t0
            with cv:
                if not cv.wait_for(lambda: n in starts, timeout=30):
                    raise RuntimeError(f"job {n} never started")
            time.sleep(interval)
    finally:
        store.close()
    del adds[0]
    events = list(EVENTS)
    return analyse(adds, events, events, starts)


def drain_worker(url: str, out: str) -> None:
    """``run_until_idle()`` after "go", instrumented; its events and times in ``out``."""
    import tinystore
    instrument()
    store = tinystore.open(url)
    handled = [0]

    @store.queue(QUEUE).work
    async def handle(payload: Any, run: Any) -> None:
        handled[0] += 1

    print("ready", flush=True)
    sys.stdin.readline()
    del EVENTS[:]
    began = time.time()
    store.run_until_idle()
    ended = time.time()
    with open(out, "w") as f:
        json.dump({"events": EVENTS, "began": began, "ended": ended, "handled": handled[0]}, f)
    store.close()


def drain(target: PostgresTarget, jobs: int, processes: int) -> dict[str, Any]:
    """W2's async drain of ``jobs`` by ``processes`` workers; per process where its writer's time went."""
    from common import fill
    url = target.new(f"profile-drain-{processes}")
    fill(url, "full", jobs)
    outs = [os.path.join("/tmp", f"{target.prefix}-drain-{i}.json") for i in range(processes)]
    children = [subprocess.Popen([sys.executable, __file__, "--drain-worker", url, out], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for out in outs]
    for child in children:
        assert child.stdout.readline().strip() == "ready"
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    for child in children:
        child.wait(timeout=600)
    got = []
    for out in outs:
        with open(out) as f:
            got.append(json.load(f))
        os.remove(out)
    target.remove(url)
    began, ended = min(g["began"] for g in got), max(g["ended"] for g in got)
    per_process = []
    for g in got:
        events = [tuple(e) for e in g["events"]]
        txns = [e for e in events if e[0] == "txn"]
        sql = [e for e in events if e[0] == "sql" and e[4] == "tinystore-pg-writer"]
        spent: dict[str, float] = {}
        for e in sql:
            spent[e[3]] = spent.get(e[3], 0.0) + (e[2] - e[1])
        in_txns = sum(t[2] - t[1] for t in txns)
        per_process.append({
            "handled": g["handled"], "seconds": g["ended"] - g["began"], "transactions": len(txns),
            "operations_per_transaction": sum(t[3] for t in txns) / max(1, len(txns)),
            "writer_busy_share": in_txns / (g["ended"] - g["began"]),
            "ms_per_transaction": 1000 * in_txns / max(1, len(txns)),
            "lock_wait_ms_per_transaction": 1000 * spent.get("lock_queue", 0.0) / max(1, len(txns)),
            "commit_ms_per_transaction": 1000 * spent.get("COMMIT", 0.0) / max(1, len(txns)),
            "statements_ms_per_transaction": 1000 * sum(spent.values()) / max(1, len(txns)),
            "statements_per_transaction": len(sql) / max(1, len(txns)),
            "top_statements_s": dict(sorted(spent.items(), key=lambda kv: -kv[1])[:8]),
        })
    return {"jobs": jobs, "processes": processes, "seconds": ended - began, "jobs_per_s": jobs / (ended - began),
            "per_process": per_process}


def explain(target: PostgresTarget, jobs: int, backlog: int, want: int = 200) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of a claim's statements on ``jobs`` due jobs (+ ``backlog`` next week),
    in a transaction rolled back after: the server's own time for each, without the round trips."""
    import psycopg
    from common import WEEK, fill
    from tinystore.backends.postgres import _sql
    url = target.new("profile-explain")
    try:
        if backlog:
            fill(url, "full", backlog, at=time.time() + WEEK, batch=10_000, start=10_000_000)
        fill(url, "full", jobs)
        q = _sql.schema("tinystore")
        lines: list[str] = []
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE tinystore.jobs")
            conn.execute("BEGIN")
            now = time.time()
            due = [seq for (_, seq, _) in conn.execute(q.due_ungrouped, ("bench", now, 2 * want)).fetchall()]
            seqs, more = due[:want], due[want:]
            # take twice: the first call of the session's plpgsql trigger function also compiles it
            for name, sql, params in (("due_ungrouped", q.due_ungrouped, ("bench", now, want)),
                                      ("take", q.take, (more,)),
                                      ("take (the session's second)", q.take, (seqs,)),
                                      ("lease_insert", q.lease_insert, (1, now + 60, seqs)),
                                      ("next_times", q.next_times, {"queue": "bench"}),
                                      ("leases_end_many", q.leases_end_many, (seqs, [1] * len(seqs))),
                                      ("jobs_delete_many", q.jobs_delete_many, (seqs,))):
                lines.append(f"-- {name}")
                began = time.perf_counter()
                plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
                lines += [row[0] for row in plan]
                lines.append(f"   (the EXPLAIN's round trip from here: {1000 * (time.perf_counter() - began):.2f} ms)")
            conn.execute("ROLLBACK")
        return lines
    finally:
        target.remove(url)


def _between(events: list, kind: str, after: float, before: float) -> list:
    return [e for e in events if e[0] == kind and e[1] >= after and e[2] <= before]


def analyse(adds: dict[int, float], parent: list, child: list, starts: dict[int, float]) -> dict[str, Any]:
    rows = []
    claim_sql: dict[str, list[float]] = {}
    add_sql: dict[str, list[float]] = {}
    for n, t0 in adds.items():
        start = starts.get(n)
        if start is None:
            continue
        add_txn = [e for e in parent if e[0] == "txn" and e[1] >= t0][:1]
        heard = [e for e in child if e[0] == "heard" and e[1] >= t0 and e[1] <= start][:1]
        txns = _between(child, "txn", t0, start)
        claim = [t for t in txns if _between(child, "sql", t[1], t[2]) and
                 any(s[3] == "take" for s in _between(child, "sql", t[1], t[2]))][-1:]
        row = {"n": n, "start_ms": (start - t0) * 1000}
        if add_txn:
            a = add_txn[0]
            row["add_txn_begin_ms"], row["add_txn_end_ms"] = (a[1] - t0) * 1000, (a[2] - t0) * 1000
            for s in _between(parent, "sql", a[1], a[2]):
                add_sql.setdefault(s[3], []).append((s[2] - s[1]) * 1000)
        if heard:
            row["heard_ms"] = (heard[0][1] - t0) * 1000
        if claim:
            c = claim[0]
            row["claim_txn_begin_ms"], row["claim_txn_end_ms"] = (c[1] - t0) * 1000, (c[2] - t0) * 1000
            row["claim_txns_before"] = len(txns) - 1
            statements = _between(child, "sql", c[1], c[2])
            row["claim_statements"] = len(statements)
            row["claim_txn_in_statements_ms"] = sum(s[2] - s[1] for s in statements) * 1000
            for s in statements:
                claim_sql.setdefault(s[3], []).append((s[2] - s[1]) * 1000)
        rows.append(row)
    keys = [k for k in ("add_txn_begin_ms", "add_txn_end_ms", "heard_ms", "claim_txn_begin_ms", "claim_txn_end_ms",
                        "start_ms", "claim_statements", "claim_txn_in_statements_ms", "claim_txns_before")
            if any(k in r for r in rows)]
    medians = {k: statistics.median(r[k] for r in rows if k in r) for k in keys}
    p99 = {k: sorted(r[k] for r in rows if k in r)[int(0.99 * (len(rows) - 1))] for k in keys}
    per_statement = {k: {"count_per_claim": len(v) / max(1, len(rows)), "median_ms": statistics.median(v)}
                     for k, v in sorted(claim_sql.items(), key=lambda kv: -sum(kv[1]))}
    add_statements = {k: {"count_per_add": len(v) / max(1, len(rows)), "median_ms": statistics.median(v)}
                      for k, v in sorted(add_sql.items(), key=lambda kv: -sum(kv[1]))}
    return {"jobs": len(rows), "median": medians, "p99": p99, "claim_statements_ms": per_statement,
            "add_statements_ms": add_statements}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.020)
    parser.add_argument("--same-process", action="store_true",
                        help="the worker in this process (store.start()), as W3's same-process case")
    parser.add_argument("--drain", type=int, metavar="JOBS",
                        help="profile W2's async drain of JOBS jobs by 1 and by 2 processes instead")
    parser.add_argument("--explain", type=int, metavar="JOBS",
                        help="EXPLAIN ANALYZE a claim's statements on JOBS due jobs instead")
    parser.add_argument("--backlog", type=int, default=0, help="with --explain: this many jobs next week too")
    parser.add_argument("--worker", nargs=2, metavar=("URL", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--drain-worker", nargs=2, metavar=("URL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return 0
    if args.drain_worker:
        drain_worker(*args.drain_worker)
        return 0
    import tinystore
    target = PostgresTarget(os.getcwd(), args.postgres)
    if args.explain:
        try:
            print("\n".join(explain(target, args.explain, args.backlog)))
        finally:
            target.close()
        return 0
    if args.same_process:
        try:
            print(json.dumps(same_process(target, args.jobs, args.interval), indent=2))
        finally:
            target.close()
        return 0
    if args.drain:
        try:
            print(json.dumps([drain(target, args.drain, n) for n in (1, 2)], indent=2))
        finally:
            target.close()
        return 0
    url = target.new("profile-latency")
    out = os.path.join("/tmp", f"{target.prefix}-worker.json")
    child = subprocess.Popen([sys.executable, __file__, "--worker", url, out], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        instrument()
        store = tinystore.open(url)
        queue = store.queue(QUEUE)
        assert child.stdout.readline().strip() == "ready"
        adds: dict[int, float] = {}
        for n in range(args.jobs + 1):
            t0 = time.time()
            queue.add({"n": n})
            adds[n] = t0
            while child.stdout.readline().strip() != f"started {n}":
                pass
            time.sleep(args.interval)
        del adds[0]  # warm-up
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=60)
        with open(out) as f:
            got = json.load(f)
        os.remove(out)
        store.close()
        result = analyse(adds, EVENTS, [tuple(e) for e in got["events"]], {int(k): v for k, v in got["starts"].items()})
        print(json.dumps(result, indent=2))
    finally:
        if child.poll() is None:
            child.kill()
        target.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
