"""Run tinystore's benchmark suite: print a table, write JSON.

    python benchmarks/run.py [--small] [--only W1,W3] [--durability full] [--repeat N]
                             [--results DIR] [--markdown] [--keep]
                             [--backend sqlite|postgres] [--postgres ADMIN_URL] [--relay MS] [--short]

The workloads are ``workloads/w1_add.py`` ... ``w13_async.py`` (docs/benchmarks.md
says what each measures); worker processes run
``child.py``. Every run first measures the raw-SQLite baseline (``baseline.py``) on the same
disk at the same ``synchronous`` setting, and every figure is reported with
its ratio to that baseline (or to the figure it must keep up with). The JSON
goes to ``benchmarks/results/<timestamp>.json`` and ``latest.json``, the table
in Markdown beside them (``.md``). ``--repeat N`` runs each throughput case N
times and reports the best run (for a machine others share).
``--only LIMITS`` / ``--only WATCH`` run ``benchmarks/limits.py`` /
``benchmarks/watch.py`` where they exist (not part of the default run).

``--backend postgres``: every store is a new database on the PostgreSQL
server of ``--postgres`` (the admin connection's URL; each database is
dropped at the end), the workers get its URL, and the baseline is raw psycopg
on that server (``baseline_postgres.py``), at the ``synchronous_commit``
tinystore sets for the durability. What differs between the backends is in
``common.Target`` / ``common.PostgresTarget``.

``--relay MS`` (PostgreSQL): every store, worker and the raw baseline reach
the server through ``relay.py``, which holds every byte MS milliseconds each
way (a server a network away: 0.25 or 1 ms); the sizes that count statements
one by one are smaller (``common.RELAYED``; ``--short`` takes them without a
relay). The header gives a raw ``SELECT 1`` through the relay and direct.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402
from common import (FULL, HERE, RELAYED, SMALL, Context, PostgresTarget, RelayProcess, Row, Target,  # noqa: E402
                    reachable)

DEFAULT = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "W11", "W12", "W13"]
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
OPTIONAL = {"LIMITS": "limits", "WATCH": "watch"}  # modules other helpers write: main(argv)


def environment(durability: str, workdir: str, target: Target) -> dict[str, Any]:
    import tinystore

    found = {
        "backend": target.name,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "durability": durability,
        "tinystore": tinystore.__version__,
        "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--", "src")),
        "platform": platform.platform(),
        "load_average_at_start": list(os.getloadavg()),
        "store_folder": workdir,
        "relay_ms": None,
    }
    if isinstance(target, PostgresTarget):
        found["postgres"] = {"server": _scrubbed(target.admin_url), "database_prefix": target.prefix,
                             **target.server()}
        found["relay_ms"] = None if target.relay is None else target.relay.delay_ms
    return found


def _scrubbed(url: str) -> str:
    """The URL without its password."""
    from psycopg.conninfo import conninfo_to_dict
    params = conninfo_to_dict(url)
    return f"postgresql://{params.get('user', '')}@{params.get('host', '')}:{params.get('port', '5432')}"


def _git(*args: str) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def run_optional(name: str, small: bool, durability: str, ctx: Context) -> list[Row]:
    """Call ``benchmarks/<module>.py``'s ``main(argv)``, a benchmark of its own; it prints its own table."""
    module_name = OPTIONAL[name]
    if ctx.postgres:
        return [ctx.not_measured(name, f"benchmarks/{module_name}.py", "it opens SQLite files only")]
    if not os.path.exists(os.path.join(HERE, module_name + ".py")):
        return [Row(name, f"benchmarks/{module_name}.py not found", None, "")]
    module = importlib.import_module(module_name)
    argv = (["--small"] if small else []) + ["--durability", durability]
    began = time.perf_counter()
    code = module.main(argv)
    seconds = time.perf_counter() - began
    return [Row(name, f"{module_name}.main({' '.join(argv)}): exit {code}; its table is above, its JSON in "
                f"benchmarks/results/{module_name}.json", None, "", met=None if code == 0 else False,
                extra={"seconds": seconds, "exit": code})]


# Output

def _fmt(value: Optional[float]) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _met(met: Optional[bool]) -> str:
    return {True: "yes", False: "NO", None: ""}[met]


def table_lines(rows: list[Row], markdown: bool = False) -> list[str]:
    head = ["", "case", "figure", "unit", "ratio", "vs", "target", "met"]
    body = [[r.workload, r.case, _fmt(r.value), r.unit, "" if r.ratio is None else f"{r.ratio:.2f}x", r.vs,
             r.target, _met(r.met)] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        return lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |" for line in body]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    right = {2, 4}
    def fmt(line: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths)))
    return [fmt(head), fmt(["-" * w for w in widths]), *[fmt(line) for line in body]]


def header_lines(env: dict[str, Any], base: dict[str, Any], command: str) -> list[str]:
    s, b = base["single"], base["batched"]
    if env.get("backend") == "postgres":
        pg = env["postgres"]
        return [
            f"command: {command}",
            f"machine: {env['cores']} cores, Python {env['python']}, PostgreSQL {pg['server_version']} at "
            f"{pg['server']} (fsync={pg['fsync']}, wal_sync_method={pg['wal_sync_method']}, shared_buffers="
            f"{pg['shared_buffers']}), durability {env['durability']} (synchronous_commit="
            f"{base['synchronous_commit']}), tinystore {env['tinystore']} at "
            f"{env['commit']}{' (src modified)' if env['dirty'] else ''}, load average at start "
            f"{env['load_average_at_start'][0]:.2f}",
            f"raw psycopg baseline (same run, same server, one connection): 1 row/txn: insert "
            f"{s['insert_per_s']:,.0f}/s, update {s['update_per_s']:,.0f}/s, delete {s['delete_per_s']:,.0f}/s, "
            f"life {s['life_per_s']:,.0f} jobs/s, one commit {base['commit_ms']:.2f} ms (one every 20 ms: "
            f"{base['commit_paced_ms']:.2f} ms), one round trip {base['round_trip_ms']:.3f} ms; 100 rows/txn: "
            f"insert {b['insert_per_s']:,.0f}/s, life {b['life_per_s']:,.0f} jobs/s",
            *([] if env.get("relay_ms") is None else [
                f"network: every connection (stores, workers, the raw baseline) through a relay holding every "
                f"byte {env['relay_ms']:g} ms each way; a raw SELECT 1 takes {base['round_trip_ms']:.3f} ms "
                f"through it, {base['direct_round_trip_ms']:.3f} ms direct"]),
        ]
    return [
        f"command: {command}",
        f"machine: {env['cores']} cores, Python {env['python']}, SQLite {env['sqlite']}, durability "
        f"{env['durability']} (synchronous={base['synchronous']}), tinystore {env['tinystore']} at "
        f"{env['commit']}{' (src modified)' if env['dirty'] else ''}, load average at start "
        f"{env['load_average_at_start'][0]:.2f}",
        f"raw SQLite baseline (same run, WAL): 1 row/txn: insert {s['insert_per_s']:,.0f}/s, update "
        f"{s['update_per_s']:,.0f}/s, delete {s['delete_per_s']:,.0f}/s, life {s['life_per_s']:,.0f} jobs/s, "
        f"one commit {base['commit_ms']:.2f} ms (one every 20 ms: {base['commit_paced_ms']:.2f} ms); "
        f"100 rows/txn: insert {b['insert_per_s']:,.0f}/s, life {b['life_per_s']:,.0f} jobs/s",
    ]


def measure_baseline(ctx: Context) -> dict[str, Any]:
    """The raw baseline of the run's backend, at its durability setting, on the same disk or server."""
    sizes = ctx.sizes
    if not ctx.postgres:
        return baseline.run(ctx.workdir, ctx.synchronous, sizes["baseline_single"], sizes["baseline_batched"],
                            sizes["baseline_paced"], sizes["w3_interval"], ctx.repeat)
    import baseline_postgres
    url = ctx.path("baseline")
    try:
        found = baseline_postgres.run(url, baseline_postgres.synchronous_commit(ctx.durability),
                                      sizes["baseline_single"], sizes["baseline_batched"], sizes["baseline_paced"],
                                      sizes["w3_interval"], ctx.repeat)
        import psycopg
        with psycopg.connect(ctx.target.direct(url), autocommit=True) as conn:
            found["direct_round_trip_ms"] = baseline_postgres.round_trip_ms(conn)
        return found
    finally:
        ctx.remove(url)


def write_results(document: dict[str, Any], markdown: list[str], folder: str) -> str:
    """``<timestamp>.json`` and ``latest.json``; beside them the same table in Markdown (``.md``)."""
    os.makedirs(folder, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    text = json.dumps(document, indent=2, default=str) + "\n"
    for name in (stamp, "latest"):
        for suffix, body in ((".json", text), (".md", "\n".join(markdown) + "\n")):
            with open(os.path.join(folder, name + suffix), "w") as f:
                f.write(body)
    return os.path.join(folder, stamp + ".json")


# Main

def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="tinystore's benchmark suite")
    parser.add_argument("--small", action="store_true", help="shrink every size: the whole run in seconds")
    parser.add_argument("--only", default=",".join(DEFAULT),
                        help=f"comma-separated workloads: {','.join(DEFAULT)}, and {','.join(OPTIONAL)} (not default)")
    parser.add_argument("--durability", choices=["full", "normal", "off"], default="full")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each throughput case N times and report the best (for a busy machine)")
    parser.add_argument("--results", default=os.path.join(HERE, "results"), help="folder for the JSON")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--keep", action="store_true", help="keep the store files (their folder is printed)")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                        help="where the stores live: SQLite files, or databases of a PostgreSQL server")
    parser.add_argument("--postgres", default=ADMIN_URL, metavar="ADMIN_URL",
                        help=f"with --backend postgres: the server's admin connection ({ADMIN_URL}); "
                             "each store is a database made there for it and dropped at the end")
    parser.add_argument("--short", action="store_true",
                        help="the sizes of a relayed run (common.RELAYED) without a relay: figures side by side "
                             "with --relay's, and a run that ends sooner on a busy machine")
    parser.add_argument("--relay", type=float, metavar="MS",
                        help="with --backend postgres: reach the server through a relay that holds every byte "
                             "MS milliseconds each way (e.g. 0.25, 1)")
    args = parser.parse_args(argv)
    if args.relay is not None and (args.backend != "postgres" or args.relay < 0):
        parser.error("--relay takes a delay >= 0 and needs --backend postgres")
    args.only = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in args.only if w not in DEFAULT and w not in OPTIONAL]
    if unknown:
        parser.error(f"unknown workload(s): {', '.join(unknown)}")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse(argv)
    from workloads import ALL

    command = "python benchmarks/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.backend == "postgres":
        why = reachable(args.postgres)
        if why is not None:
            print(f"the PostgreSQL server of --postgres cannot be reached: {why}", file=sys.stderr)
            return 2
    workdir = tempfile.mkdtemp(prefix="tinystore-bench-")
    relay = None
    if args.relay is not None:
        from psycopg.conninfo import conninfo_to_dict
        params = conninfo_to_dict(args.postgres)
        relay = RelayProcess((params.get("host") or "127.0.0.1", int(params.get("port") or 5432)), args.relay)
    target = PostgresTarget(workdir, args.postgres, relay) if args.backend == "postgres" else Target(workdir)
    env = environment(args.durability, workdir, target)
    sizes = SMALL if args.small else {**FULL, **RELAYED} if relay is not None or args.short else FULL
    ctx = Context(sizes=sizes, durability=args.durability, workdir=workdir, repeat=max(1, args.repeat),
                  target=target)
    began = time.perf_counter()
    failures = 0
    header: list[str] = []
    try:
        ctx.baseline = measure_baseline(ctx)
        header = header_lines(env, ctx.baseline, command.strip())
        for line in header:
            print(line, flush=True)
        for name in args.only:
            started = time.perf_counter()
            try:
                rows = run_optional(name, args.small, args.durability, ctx) if name in OPTIONAL else ALL[name].run(ctx)
            except Exception as exc:  # one workload's failure is reported; the others still run
                failures += 1
                traceback.print_exc()
                rows = [Row(name, f"failed: {type(exc).__name__}: {exc}", None, "", met=False)]
            failures += name in OPTIONAL and rows[0].extra.get("exit", 0) != 0
            ctx.results[name] = rows
            print(f"{name} ({getattr(ALL.get(name), 'TITLE', name.lower())}) took "
                  f"{time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            target.close()
            shutil.rmtree(workdir, ignore_errors=True)
        if relay is not None:
            relay.close()
    rows = [r for name in args.only for r in ctx.results.get(name, [])]
    env["load_average_at_end"] = list(os.getloadavg())
    env["seconds"] = time.perf_counter() - began
    print()
    for line in table_lines(rows, args.markdown):
        print(line)
    document = {"command": command.strip(), "small": args.small, "short": args.short, "repeat": ctx.repeat, "environment": env,
                "sizes": ctx.sizes, "baseline": ctx.baseline, "rows": [r.to_json() for r in rows]}
    markdown = [f"- {line}" for line in header] + ["", *table_lines(rows, markdown=True)]
    path = write_results(document, markdown, args.results)
    kept = f"; store files in {workdir}" if args.keep else ""
    if args.keep and ctx.postgres:
        kept = f"; databases {target.prefix}_* kept on the server, tallies in {workdir}"
    print(f"\n{len(rows)} figures in {env['seconds']:.0f}s; JSON: {path}{kept}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
