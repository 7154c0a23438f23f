"""A soak test of tinystore run the way production runs it: worker processes, a producer, faults.

    .venv/bin/python tests/soak/run.py --minutes 10 [--seed 7] [--workers 3] [--rate 50] [--dir DIR]
    .venv/bin/python tests/soak/run.py --backend postgres [--server URL] ...

This process is the supervisor. It starts ``--workers`` worker processes
(each opens the store file and calls ``store.serve()`` with handlers for
every queue of ``soak_plan.QUEUES``) and one producer adding about
``--rate`` jobs a second, each with an explicit id and a plan for what its
handler does on each attempt. Every few seconds it injects a fault chosen
at random from the seed: SIGKILL of a worker (then it starts another),
SIGSTOP of a worker for longer than the lease (then SIGCONT), SIGTERM of a
worker (it must exit 0 within its grace; then another starts), SIGTERM or
SIGKILL of the producer (then another starts, with a new id prefix). It
logs every start, fault and exit, with its time and pid, to ``faults.jsonl``.

On PostgreSQL (``--backend postgres``) the store is a database of its own,
made for the run and dropped at its end, on a private server that
``soak_pg.PrivateServer`` makes in the run's folder; the faults then also
end sessions with ``pg_terminate_backend`` (every session of one worker, or
every session of the store) and restart the server with ``pg_ctl restart
-m fast`` or ``-m immediate``. ``--server URL`` makes the store's database on
that server instead (the shared one of the tests): a server of others is
never restarted, so only the cuts are added there. The witness stays in
files either way.

After ``--minutes`` the faults stop, the producer is stopped, and the
workers drain every job still due; then they are stopped with SIGTERM and
``soak_check`` checks the witness the children wrote against the store's
final states (kept in ``finals.json`` too). It prints the figures and each
invariant, and exits 0 when every invariant held, 1 naming each one violated
(2 where the soak itself could not run). The run's folder (store, witness, logs, report) is removed
after a run that held, unless ``--keep`` or ``--dir``; it is kept, and
named, after one that did not.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import soak_pg  # noqa: E402
import tinystore  # noqa: E402
sys.path.insert(0, os.path.dirname(HERE))  # tests/: the kits make and drop PostgreSQL databases

import kits  # noqa: E402
from soak_check import check, final_reads, read_jsonl, save_finals, witness_files  # noqa: E402
from soak_plan import GRACE, LEASE, QUEUES, options  # noqa: E402

CHILD = os.path.join(HERE, "soak_child.py")
READY_TIMEOUT = 30.0
EXIT_MARGIN = 5.0  # a SIGTERMed worker exits within GRACE + this


class SoakError(Exception):
    """The soak itself could not go on (a child that never got ready)."""


class Child:
    def __init__(self, role: str, proc: subprocess.Popen, witness: str, log: str, prefix: Optional[str]):
        self.role = role
        self.proc = proc
        self.pid = proc.pid
        self.witness = witness
        self.log = log
        self.prefix = prefix
        self.expected = False  # we signalled it to end: its exit is not a death on its own
        self.term_at = 0.0


class Supervisor:
    def __init__(self, args: argparse.Namespace, folder: str):
        self.args = args
        self.folder = folder
        self.server: Optional[soak_pg.PrivateServer] = None
        self.kit: Optional[kits.PostgresKit] = None
        if args.backend == "sqlite":
            self.target = os.path.join(folder, "store.db")
        else:
            if args.server is None:
                self.server = soak_pg.PrivateServer(folder)
                self.server.start()
            self.admin = args.server or self.server.url
            self.kit = kits.PostgresKit(Path(folder), server=self.admin)
            self.target = self.kit.new_target("soak")
            self.database = self.target.rsplit("/", 1)[1]
        self.wdir = os.path.join(folder, "witness")
        self.ldir = os.path.join(folder, "logs")
        os.makedirs(self.wdir, exist_ok=True)
        os.makedirs(self.ldir, exist_ok=True)
        self.rng = random.Random(f"soak/{args.seed}")
        self.flog = open(os.path.join(folder, "faults.jsonl"), "a", buffering=1)
        self.children: list[Child] = []
        self.producers = 0
        self.spawned = 0
        # The children import the tinystore this process imported (whatever PYTHONPATH said, relative or not:
        # they run in the run's folder).
        path = [os.path.dirname(os.path.dirname(os.path.abspath(tinystore.__file__)))]
        path += [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(path))

    # The log

    def log(self, ev: str, t: Optional[float] = None, **fields) -> None:
        fields.update(ev=ev, t=time.time() if t is None else t)
        self.flog.write(json.dumps(fields) + "\n")

    def say(self, text: str) -> None:
        if not self.args.quiet:
            print(f"[soak {time.strftime('%H:%M:%S')}] {text}", flush=True)

    # Children

    def live(self, role: str) -> list[Child]:
        return [c for c in self.children if c.role == role and c.proc.returncode is None]

    def spawn(self, role: str) -> Child:
        self.spawned += 1
        extra: list[str] = []
        prefix = None
        if role == "producer":
            self.producers += 1
            prefix = f"p{self.producers}"
            extra = ["--prefix", prefix, "--rate", str(self.args.rate), "--seed", str(self.args.seed)]
        log = os.path.join(self.ldir, f"{role}-{self.spawned:03d}.log")
        with open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, CHILD, role, self.target, self.wdir, *extra],
                                    stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT,
                                    env=self.env, cwd=self.folder)
        child = Child(role, proc, os.path.join(self.wdir, f"{role}-{proc.pid}.jsonl"), log, prefix)
        self.children.append(child)
        self.log("start", pid=child.pid, role=role, log=os.path.relpath(log, self.folder), prefix=prefix)
        self.wait_ready(child)
        return child

    def wait_ready(self, child: Child) -> None:
        """Wait for the child's "ready" record (its store is open, its handlers registered)."""
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            try:
                with open(child.witness, "rb") as f:
                    if b'"ev":"ready"' in f.readline():
                        self.log("ready", pid=child.pid)
                        return
            except FileNotFoundError:
                pass
            if child.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.log("not_ready", pid=child.pid, rc=child.proc.poll(), log_tail=tail(child.log))
        raise SoakError(f"{child.role} pid {child.pid} did not get ready; its log:\n{tail(child.log, 3000)}")

    def reap(self) -> None:
        """Children that ended without being told to: each is a violation; another takes its place."""
        for c in list(self.children):
            if c.proc.returncode is None and c.proc.poll() is not None and not c.expected:
                self.log("died", pid=c.pid, rc=c.proc.returncode, log_tail=tail(c.log))
                self.say(f"{c.role} pid {c.pid} died on its own with status {c.proc.returncode}")
                if c.role == "producer" and self.producing:
                    self.spawn("producer")
                elif c.role == "worker":
                    self.spawn("worker")

    def kill(self, c: Child) -> None:
        c.expected = True
        self.log("kill", pid=c.pid, role=c.role)  # the time read before the kill: never after its death
        os.kill(c.pid, signal.SIGKILL)
        rc = c.proc.wait()
        self.log("exit", pid=c.pid, rc=rc)

    def term(self, c: Child, final: bool = False, wait: bool = True) -> None:
        c.expected = True
        self.log("term", pid=c.pid, role=c.role, final=final)
        c.term_at = time.monotonic()
        os.kill(c.pid, signal.SIGTERM)
        if wait:
            self.wait_exits([c])

    def wait_exits(self, children: list[Child]) -> None:
        """Wait for SIGTERMed children, each at most GRACE + EXIT_MARGIN from its SIGTERM; log each exit
        when it is seen. One still running then has its threads' stacks dumped into its log, and is killed."""
        waiting = list(children)
        while waiting:
            for c in list(waiting):
                rc = c.proc.poll()
                if rc is not None:
                    self.log("exit", pid=c.pid, rc=rc, log_tail=tail(c.log) if rc != 0 else "")
                    waiting.remove(c)
                elif time.monotonic() - c.term_at > GRACE + EXIT_MARGIN:
                    os.kill(c.pid, signal.SIGUSR1)  # faulthandler: every thread's stack, into its log
                    time.sleep(0.5)
                    self.log("term_timeout", pid=c.pid, log_tail=tail(c.log, 600))
                    os.kill(c.pid, signal.SIGKILL)
                    self.log("exit", pid=c.pid, rc=c.proc.wait())
                    waiting.remove(c)
            time.sleep(0.01)

    # Faults

    def faults(self) -> dict[str, int]:
        """The faults of this run, with their weights."""
        kinds = {"kill_worker": 3, "stop_worker": 3, "term_worker": 3, "term_producer": 1, "kill_producer": 1}
        if self.kit is not None:
            kinds.update(cut_worker=3, cut_all=2)
        if self.server is not None:
            kinds.update(restart_fast=1, restart_immediate=1)
        return kinds

    def fault(self) -> None:
        kinds = self.faults()
        kind = self.rng.choices(list(kinds), weights=list(kinds.values()))[0]
        if kind == "cut_all":
            self.log("cut_all")  # the time read before the cut
            ended = soak_pg.cut(self.admin, self.database)
            self.log("cut_all_done", sessions=ended)
            self.say(f"pg_terminate_backend: every session of the store ({ended})")
            return
        if kind.startswith("restart"):
            mode = kind.split("_")[1]
            self.say(f"pg_ctl restart -m {mode}")
            self.log("restart", mode=mode)
            self.server.restart(mode)
            self.log("restarted", mode=mode)
            return
        if kind.endswith("producer"):
            c = self.live("producer")[0]
            self.say(f"{'SIGTERM' if kind.startswith('term') else 'SIGKILL'} producer pid {c.pid}")
            self.term(c) if kind.startswith("term") else self.kill(c)
            self.spawn("producer")
            return
        workers = self.live("worker")
        c = self.rng.choice(workers)
        if kind == "cut_worker":
            ports = soak_pg.session_ports(c.pid)
            self.log("cut", pid=c.pid, role=c.role)
            ended = soak_pg.cut(self.admin, self.database, ports)
            self.log("cut_done", pid=c.pid, sessions=ended)
            self.say(f"pg_terminate_backend: the sessions of worker pid {c.pid} ({ended})")
        elif kind == "kill_worker":
            self.say(f"SIGKILL worker pid {c.pid}")
            self.kill(c)
            self.spawn("worker")
        elif kind == "term_worker":
            self.say(f"SIGTERM worker pid {c.pid}")
            self.term(c)
            self.spawn("worker")
        else:
            pause = self.rng.uniform(LEASE + 0.5, LEASE + 2.0)  # longer than the lease: its leases run out
            self.say(f"SIGSTOP worker pid {c.pid} for {pause:.1f}s")
            self.log("stop", pid=c.pid, role=c.role, seconds=pause)
            os.kill(c.pid, signal.SIGSTOP)
            until = time.monotonic() + pause
            if wait_stopped(c.pid):
                # A process stopped in the middle of a write holds SQLite's write lock (PostgreSQL: its
                # queues' locks) until SIGCONT: then no process can write (renew, settle, claim), and their
                # leases may run out meanwhile.
                self.log("stop_lock", pid=c.pid, held=self.write_lock_held(c.pid))
            self.sleep_reaping(until - time.monotonic())
            os.kill(c.pid, signal.SIGCONT)
            self.log("cont", pid=c.pid, role=c.role)

    def write_lock_held(self, pid: int) -> bool:
        if self.kit is None:
            return write_lock_held(self.target)
        return soak_pg.holds_queue_lock(self.admin, self.database, soak_pg.session_ports(pid))

    def sleep_reaping(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while True:
            self.reap()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.05, left))

    # The soak

    producing = True

    def run(self) -> int:
        args = self.args
        with tinystore.open(self.target) as store:  # the queues' options, kept before any child starts
            for name in QUEUES:
                store.queue(name, **options(name))
        for _ in range(args.workers):
            self.spawn("worker")
        self.spawn("producer")
        start = time.time()
        self.log("soak_start", t=start, seed=args.seed, workers=args.workers, rate=args.rate, minutes=args.minutes)
        self.say(f"soak: {args.minutes:g} min, seed {args.seed}, {args.workers} workers, ~{args.rate:g} jobs/s, "
                 f"folder {self.folder}")
        end = start + args.minutes * 60
        next_fault = time.time() + self.rng.uniform(2.0, 5.0)
        while time.time() < end:
            self.reap()
            if time.time() >= next_fault:
                self.fault()
                next_fault = time.time() + self.rng.uniform(2.0, 5.0)
            time.sleep(0.05)
        self.log("faults_end")
        self.producing = False
        for c in self.live("producer"):
            self.term(c, final=True)
        self.say("faults off, producer stopped; draining")
        drained = self.drain()
        workers = self.live("worker")
        for c in workers:
            self.term(c, final=True, wait=False)
        self.wait_exits(workers)
        self.reap()
        finals, stats = final_reads(self.target, QUEUES)
        save_finals(self.folder, finals, stats)
        self.flog.flush()
        events, _ = read_jsonl([os.path.join(self.folder, "faults.jsonl")])
        records, bad = read_jsonl(witness_files(self.wdir))
        result = check(records, events, finals, bad_lines=bad, stats=stats)
        if not drained:
            result.notes.append(f"the drain did not finish within {args.drain_timeout:g}s")
        head = (f"tinystore soak: {args.minutes:g} min, seed {args.seed}, {args.workers} workers, "
                f"~{args.rate:g} jobs/s, durability full; Python {sys.version.split()[0]}, "
                f"{self.store_kind()}; {os.cpu_count()} cores\n"
                f"tinystore: {tinystore_origin()}\nfolder: {self.folder}")
        report = head + "\n" + result.report()
        with open(os.path.join(self.folder, "report.txt"), "w") as f:
            f.write(report + "\n")
        print(report, flush=True)
        return 0 if result.ok else 1

    def drain(self) -> bool:
        """Wait until no job is scheduled, waiting or running (the workers, faults off, run them all)."""
        deadline = time.monotonic() + self.args.drain_timeout
        with tinystore.open(self.target) as store:
            while True:
                self.reap()
                stats = store.stats()
                pending = sum(s["scheduled"] + s["waiting"] + s["running"] for s in stats.values())
                if pending == 0:
                    self.log("drained")
                    return True
                if time.monotonic() > deadline:
                    self.log("drain_timeout", pending=pending)
                    return False
                time.sleep(0.2)

    def store_kind(self) -> str:
        if self.kit is None:
            return f"SQLite {tinystore_sqlite_version()}"
        where = f"a private server on port {self.server.port}" if self.server else "the server of --server"
        return (f"PostgreSQL {soak_pg.server_version(self.admin)} ({where}, database {self.database}); "
                f"faults {', '.join(self.faults())}")

    def cleanup(self) -> None:
        """End every child still running, stopped ones too: only the ones this supervisor started; then drop
        the store's database and remove the private server."""
        for c in self.children:
            if c.proc.returncode is None and c.proc.poll() is None:
                try:
                    os.kill(c.pid, signal.SIGCONT)
                    os.kill(c.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                c.proc.wait()
        self.flog.close()
        try:
            if self.kit is not None:
                self.kit.cleanup()
        finally:
            if self.server is not None:
                self.server.remove()


def wait_stopped(pid: int, timeout: float = 1.0) -> bool:
    """Wait until the kernel shows ``pid`` stopped (state T in /proc/<pid>/stat)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                    return True
        except (OSError, IndexError):
            return False
        time.sleep(0.001)
    return False


def write_lock_held(path: str, wait: float = 1.5) -> bool:
    """Whether someone holds the store's write lock for ``wait`` seconds: taken and given back at once if not.

    Live workers hold it for milliseconds at a time; only a stopped one holds it this long.
    """
    import sqlite3
    conn = sqlite3.connect(path, timeout=wait, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return True
        raise
    finally:
        conn.close()


def tinystore_origin() -> str:
    """Where tinystore was imported from, and the commit of that checkout when git can tell."""
    where = os.path.dirname(os.path.dirname(os.path.abspath(tinystore.__file__)))
    try:
        commit = subprocess.run(["git", "-C", where, "log", "-1", "--format=%h"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", where, "status", "--porcelain", "--", "."], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", ""
    return where + (f" at {commit}{' with changes' if dirty else ''}" if commit else "")


def tinystore_sqlite_version() -> str:
    import sqlite3
    return sqlite3.sqlite_version


def tail(path: str, size: int = 1200) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0, help="how long faults and jobs go on (default 1)")
    parser.add_argument("--seed", type=int, default=1, help="chooses the jobs' plans and the faults (default 1)")
    parser.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    parser.add_argument("--rate", type=float, default=50.0, help="jobs the producer adds per second (default 50)")
    parser.add_argument("--drain-timeout", type=float, default=30.0, help="seconds the drain may take (default 30)")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                        help="the store's backend (default sqlite); postgres: on a private server, restarted too")
    parser.add_argument("--server", metavar="URL",
                        help="postgres: make the store's database on this server (never restarted) instead")
    parser.add_argument("--dir", help="the run's folder (kept); default: a new temporary folder")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder after a run that held")
    parser.add_argument("--quiet", action="store_true", help="print only the report")
    args = parser.parse_args()
    if args.workers < 2:
        parser.error("--workers must be at least 2 (faults take one away at a time)")
    folder = args.dir or tempfile.mkdtemp(prefix="tinystore-soak-")
    os.makedirs(folder, exist_ok=True)
    if os.listdir(folder):
        parser.error(f"--dir {folder} is not empty")
    if args.server and args.backend != "postgres":
        parser.error("--server is for --backend postgres")

    def on_signal(sig: int, _frame: object) -> None:
        raise SystemExit(128 + sig)  # the finally below ends the children
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    sup: Optional[Supervisor] = None
    status = 2
    try:
        sup = Supervisor(args, folder)
        status = sup.run()
    except SoakError as exc:
        print(f"soak could not run: {exc}", file=sys.stderr)
        status = 2
    finally:
        if sup is not None:
            sup.cleanup()
        else:
            soak_pg.stop_left(folder)  # a private server that started before the supervisor could
        if status == 0 and not args.dir and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
        elif status != 0:
            print(f"the run's files are kept in {folder}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
