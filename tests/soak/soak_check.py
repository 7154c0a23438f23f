"""The soak's checker: reads the witness, the supervisor's log and the store's final states, and
says which invariants held.

Inputs, all plain data (so that ``test_soak_check.py`` can feed it broken witnesses):

- ``records``: every witness line of every child (dicts; see ``soak_child.py``);
- ``events``: the supervisor's log (``run.py``): ``start``, ``ready``, ``kill``, ``stop``, ``cont``,
  ``term``, ``exit`` (with ``rc``), ``died``, ``term_timeout``, ``not_ready``, ``cut`` (its PostgreSQL
  sessions ended), each with ``t`` and ``pid``; ``soak_start``, ``faults_end``, ``drained``,
  ``drain_timeout``, and on PostgreSQL ``cut_all`` (every session of the store ended), ``restart`` and
  ``restarted`` (the server's restart began, and the server accepts connections again);
- ``finals``: ``{job id: {"queue", "state", "attempt", "error"}}`` read from the store after the drain
  (a job the store does not keep is absent).

Times are ``time.time()`` of the same machine. The bounds the checks rely on are in ``Bounds``; each
is explained where it is used. A run is one call of a handler: ``begin`` to ``end`` in one process.
"""

from __future__ import annotations

import bisect
import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from soak_plan import GRACE, QUEUES, SLOTS

INF = float("inf")


@dataclass(frozen=True)
class Bounds:
    # L: how long after its claim a handler begins (the claim commits, the loop hands the job to a task
    # or a thread, the handler's first line writes ``begin``), in a process that is not stopped. The
    # store counts a start when it claims (LIM-03); the witness sees the begin. Handlers' sleeps in the
    # soak overshoot by far less than this (the report shows the largest overshoot seen, ``lag``).
    claim_lag: float = 0.3
    # How close to the timeout a timeout may fire: the timer and the witness read different clocks
    # (monotonic and time.time) and the loop fires a timer in the iteration after it is due.
    eps: float = 0.05
    # How late past its timeout an async handler may still return on its own: the loop cancels it at
    # its next await, after whatever the loop was doing when the deadline came; a loop that stalled
    # stall_lease or more makes the run stale. (An answer that came after the timeout must never
    # settle the job done, however late the cancel: that is checked to within eps.)
    late: float = 0.5
    # "Soon after": a settlement is written by the worker's next claim cycle, milliseconds after the
    # handler returned; a kill, stop or SIGTERM this soon after a return may have lost it.
    settle_window: float = 2.0
    # A SIGTERMed worker exits within GRACE plus this (closing the store, the interpreter's exit).
    exit_margin: float = 5.0
    # A worker's event loop that stalled this long (the witness's ``stall`` records) may have let its
    # leases run out: it renews every lease/2 = 1 s, and a stall of more than 1 s leaves a lease
    # unrenewed past its 2 s; half of that leaves room for the renewal's own write. Such a stall
    # counts like a SIGSTOP of the process. (A loop blocks when its process waits for SQLite's write
    # lock on the loop's thread, held by a process that is stopped in the middle of a write.) A server
    # restart that kept the server away this long counts so for every process: none could renew.
    stall_lease: float = 0.5


@dataclass
class Run:
    pid: int
    q: str
    id: str
    a: int
    b: float
    kind: str
    grp: Optional[str]
    e: Optional[float] = None
    outcome: Optional[str] = None
    elapsed: Optional[float] = None
    lag: float = 0.0
    cancels: list = field(default_factory=list)   # (t, elapsed, flag, via)
    slow: bool = False
    calls: dict = field(default_factory=dict)     # step name -> time of step_call
    fns: list = field(default_factory=list)       # (name, t, tok)
    answers: list = field(default_factory=list)   # (name, t, tok)
    end: float = INF                              # the end of its interval (see build)
    open_reason: str = ""

    def describe(self, rel) -> str:
        e = f"{rel(self.e)}" if self.e is not None else f"{rel(self.end)} ({self.open_reason})"
        el = f" {self.elapsed:.3f}s" if self.elapsed is not None else ""
        grp = f" group {self.grp}" if self.grp else ""
        return (f"{self.q}/{self.id} attempt {self.a}{grp} pid {self.pid} began {rel(self.b)} ended {e}"
                f" [{self.outcome or 'open'}{el}]")


@dataclass
class Proc:
    pid: int
    role: str = "?"
    start: float = 0.0
    ready: Optional[float] = None
    kills: list = field(default_factory=list)
    terms: list = field(default_factory=list)     # (t, final)
    stops: list = field(default_factory=list)     # [stop t, cont t or INF]
    stalls: list = field(default_factory=list)    # (start, stop) of the loop stalls its witness recorded
    frozen: list = field(default_factory=list)    # (from, to, why): no process could write (a stopped writer,
    #                                               a server restart long enough to let leases run out)
    cuts: list = field(default_factory=list)      # (t, what): its PostgreSQL sessions ended (its own, or all)
    held: list = field(default_factory=list)      # (stop, cont) of its stops that held the write lock
    exit_t: Optional[float] = None
    rc: Optional[int] = None
    died: bool = False
    term_timeout: bool = False
    not_ready: bool = False
    log_tail: str = ""

    def stopped_during(self, a: float, z: float, stall: float = INF) -> bool:
        """SIGSTOPped, or its loop stalled at least ``stall`` seconds, at some moment of [a, z]."""
        return (any(s <= z and c >= a for s, c in self.stops)
                or any(s <= z and c >= a for s, c, _ in self.frozen)
                or any(s <= z and c >= a and c - s >= stall for s, c in self.stalls))

    def faults_in(self, a: float, z: float, stall: float = INF) -> list[tuple[str, float]]:
        """The faults that began in [a, z]: signals to it, freezes of the store, its loop's long stalls, its
        sessions cut or the server restarted (either may lose a write in flight: a settlement)."""
        found = [("SIGKILL", t) for t in self.kills] + [("SIGTERM", t) for t, _ in self.terms]
        found += [("SIGSTOP", s) for s, _ in self.stops]
        found += [(f"freeze ({why})", s) for s, _, why in self.frozen]
        found += self.cuts
        found += [("loop stall", s) for s, c in self.stalls if c - s >= stall]
        return [(k, t) for k, t in found if a <= t <= z]


@dataclass
class Invariant:
    number: int
    title: str
    violations: list = field(default_factory=list)

    def add(self, text: str) -> None:
        self.violations.append(text)

    @property
    def ok(self) -> bool:
        return not self.violations


@dataclass
class Result:
    invariants: list
    figures: dict
    notes: list

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.invariants)

    def violated(self) -> list:
        return [i for i in self.invariants if not i.ok]

    def report(self, limit: int = 8) -> str:
        out = ["figures:"]
        width = max(len(k) for k in self.figures) if self.figures else 0
        for k, v in self.figures.items():
            out.append(f"  {k:<{width}}  {v}")
        if self.notes:
            out.append("notes:")
            out += [f"  - {n}" for n in self.notes]
        out.append("invariants:")
        for inv in self.invariants:
            mark = "ok  " if inv.ok else "FAIL"
            count = "" if inv.ok else f": {len(inv.violations)} violation(s)"
            out.append(f"  [{mark}] {inv.number}. {inv.title}{count}")
            for text in inv.violations[:limit]:
                out.append("         - " + text.replace("\n", "\n           "))
            if len(inv.violations) > limit:
                out.append(f"         ... and {len(inv.violations) - limit} more")
        if self.ok:
            out.append("RESULT: every invariant held")
        else:
            out.append("RESULT: VIOLATED " + "; ".join(f"{i.number} ({i.title})" for i in self.violated()))
        return "\n".join(out)


# Reading


def read_jsonl(paths: Iterable[str]) -> tuple[list[dict], int]:
    """Every record of these files, in file order; and how many lines did not parse."""
    records, bad = [], 0
    for path in paths:
        with open(path, "rb") as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    bad += 1
    return records, bad


def witness_files(folder: str) -> list[str]:
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".jsonl"))


def final_reads(store_path: str, names: Iterable[str]) -> tuple[dict[str, dict], dict[str, dict]]:
    """Every job the store keeps in these queues, as the checker reads them, and ``store.stats()``; both
    at one frozen moment of the store's clock, so that no job comes due or expires between them."""
    import time

    import tinystore
    from tinystore.testing import FakeClock
    finals: dict[str, dict] = {}
    with tinystore.open(store_path, clock=FakeClock(time.time())) as store:
        for name in names:
            q = store.queue(name)
            after = None
            while True:
                page = q.jobs(limit=5000, after=after)
                for j in page:
                    finals[j.id] = {"queue": name, "state": j.state, "attempt": j.attempt,
                                    "attempts": j.attempts, "error": j.error}
                if len(page) < 5000:
                    break
                after = page[-1].id
        stats = store.stats()
    return finals, stats


def save_finals(folder: str, finals: dict[str, dict], stats: dict[str, dict]) -> None:
    """Keep what ``final_reads`` read in the run's folder, ``finals.json`` (a PostgreSQL store is dropped)."""
    with open(os.path.join(folder, "finals.json"), "w") as f:
        json.dump({"finals": finals, "stats": stats}, f)


def check_folder(folder: str, **kwargs: Any) -> "Result":
    """Check a run's folder again (``run.py --dir``, or one kept after a failure)."""
    events, _ = read_jsonl([os.path.join(folder, "faults.jsonl")])
    records, bad = read_jsonl(witness_files(os.path.join(folder, "witness")))
    with open(os.path.join(folder, "finals.json")) as f:
        kept = json.load(f)
    return check(records, events, kept["finals"], bad_lines=bad, stats=kept["stats"], **kwargs)


# Building runs and processes


def build_procs(events: list[dict], records: Iterable[dict] = (), bounds: Bounds = Bounds()) -> dict[int, Proc]:
    procs: dict[int, Proc] = {}
    outages: list[tuple[float, float, str]] = []  # restarts that kept the server away stall_lease or more
    cuts_all: list[float] = []
    restart: Optional[dict] = None
    for r in records:
        if r.get("ev") == "stall":
            procs.setdefault(r["pid"], Proc(r["pid"])).stalls.append((r["start"], r["stop"]))
    for ev in events:
        pid = ev.get("pid")
        if ev["ev"] == "cut_all":
            cuts_all.append(ev["t"])
        elif ev["ev"] == "restart":
            restart = ev
        elif ev["ev"] == "restarted" and restart is not None:
            if ev["t"] - restart["t"] >= bounds.stall_lease:
                outages.append((restart["t"], ev["t"], f"the server restarted with -m {restart.get('mode')}"))
            cuts_all.append(restart["t"])
            restart = None
        if pid is None:
            continue
        p = procs.setdefault(pid, Proc(pid))
        kind, t = ev["ev"], ev["t"]
        if kind == "start":
            p.role, p.start = ev.get("role", "?"), t
        elif kind == "ready":
            p.ready = t
        elif kind == "kill":
            p.kills.append(t)
        elif kind == "term":
            p.terms.append((t, bool(ev.get("final"))))
        elif kind == "stop":
            p.stops.append([t, INF])
        elif kind == "cut":
            p.cuts.append(("its sessions cut", t))
        elif kind == "cont":
            if p.stops and p.stops[-1][1] == INF:
                p.stops[-1][1] = t
        elif kind in ("exit", "died"):
            p.exit_t, p.rc = t, ev.get("rc")
            p.died = p.died or kind == "died"
            p.log_tail = ev.get("log_tail") or p.log_tail
        elif kind == "term_timeout":
            p.term_timeout = True
            p.log_tail = ev.get("log_tail", p.log_tail)
        elif kind == "stop_lock":
            if ev.get("held") and p.stops:
                p.stops[-1].append("held")
        elif kind == "not_ready":
            p.not_ready = True
            p.log_tail = ev.get("log_tail", p.log_tail)
    # A stop that held SQLite's write lock (PostgreSQL: queues' locks) froze every process: nobody could
    # renew, settle or claim. So did a restart that kept the server away long enough.
    for p in procs.values():
        for stop in p.stops:
            if "held" in stop[2:]:
                p.held.append((stop[0], stop[1]))
                for other in procs.values():
                    if other is not p:
                        other.frozen.append((stop[0], stop[1], f"pid {p.pid} stopped holding the write lock"))
        p.stops = [(stop[0], stop[1]) for stop in p.stops]
        p.frozen += outages
        p.cuts += [("every session cut", t) for t in cuts_all]
    return procs


def build_runs(records: list[dict], procs: dict[int, Proc], end_of_soak: float) -> tuple[list[Run], list[str]]:
    """The runs the witness shows; and the anomalies in it (records that fit no run)."""
    runs: list[Run] = []
    open_runs: dict[tuple[int, str, int], Run] = {}
    anomalies: list[str] = []
    for r in records:
        ev = r.get("ev")
        if ev not in ("begin", "end", "cancel", "slow", "step_call", "step_fn", "step_ans"):
            continue
        key = (r["pid"], r["id"], r["a"])
        if ev == "begin":
            if key in open_runs:
                anomalies.append(f"pid {r['pid']} began {r['q']}/{r['id']} attempt {r['a']} again before it ended")
            run = Run(r["pid"], r["q"], r["id"], r["a"], r["t"], r.get("kind", "?"), r.get("grp"))
            open_runs[key] = run
            runs.append(run)
            continue
        run = open_runs.get(key)
        if run is None:
            anomalies.append(f"a {ev} record of {r.get('q')}/{r['id']} attempt {r['a']} pid {r['pid']} outside any run")
            continue
        if ev == "end":
            run.e, run.outcome, run.elapsed = r["t"], r.get("outcome"), r.get("elapsed")
            run.lag = r.get("lag") or 0.0
            run.end = run.e
            del open_runs[key]
        elif ev == "cancel":
            run.cancels.append((r["t"], r["elapsed"], r.get("flag"), r.get("via")))
        elif ev == "slow":
            run.slow = True
        elif ev == "step_call":
            run.calls[r["name"]] = r["t"]
        elif ev == "step_fn":
            run.fns.append((r["name"], r["t"], r["tok"]))
        elif ev == "step_ans":
            run.answers.append((r["name"], r["t"], r["tok"]))
    for run in open_runs.values():
        # A killed process's open run ends when it was killed (the time read just before the kill:
        # never later than its death, and its lease ended after that). A run still open when its
        # process exited (a thread past the grace period) ends when it exited.
        p = procs.get(run.pid)
        if p and p.kills and min(p.kills) >= run.b:
            run.end, run.open_reason = min(k for k in p.kills if k >= run.b), "killed"
        elif p and p.exit_t is not None:
            run.end, run.open_reason = p.exit_t, "process exited"
        else:
            run.end, run.open_reason = end_of_soak, "never ended"
    return runs, anomalies


# The checks


def check(records: list[dict], events: list[dict], finals: dict[str, dict], *,
          queues: Optional[dict] = None, bounds: Bounds = Bounds(), bad_lines: int = 0,
          stats: Optional[dict[str, dict]] = None) -> Result:
    """The invariants over the witness, the faults' log and the jobs kept (``finals``); the seventh where
    ``stats``, read with ``finals`` (``final_reads``), is given."""
    queues = queues or QUEUES
    procs = build_procs(events, records, bounds)
    times = [e["t"] for e in events] + [r["t"] for r in records]
    t_first = min(times) if times else 0.0
    t_start = next((e["t"] for e in events if e["ev"] == "soak_start"), t_first)
    t_faults_end = next((e["t"] for e in events if e["ev"] == "faults_end"), max(times, default=t_start))
    t_drained = next((e["t"] for e in events if e["ev"] in ("drained", "drain_timeout")), t_faults_end)
    end_of_soak = max(times, default=t_start)

    def rel(t: Optional[float]) -> str:
        if t is None:
            return "?"
        if t == INF:
            return "never"
        return f"+{t - t_start:.3f}s"

    runs, anomalies = build_runs(records, procs, end_of_soak)
    adding = {r["id"]: r for r in records if r.get("ev") == "adding"}
    added = {r["id"]: r for r in records if r.get("ev") == "added"}
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_job[run.id].append(run)
    for lst in by_job.values():
        lst.sort(key=lambda r: r.b)

    def proc(pid: int) -> Proc:
        return procs.get(pid) or Proc(pid)

    def timeout_of(q: str) -> float:
        return queues[q]["timeout"]

    def stale(run: Run, until: Optional[float] = None) -> bool:
        """Its process was stopped, or its loop stalled, from just before its claim to ``until``: its lease
        may have run out."""
        return proc(run.pid).stopped_during(run.b - bounds.claim_lag, run.end if until is None else until,
                                            bounds.stall_lease)

    def plan_of(job: str) -> dict:
        return (adding.get(job) or {}).get("plan") or {}

    inv = [Invariant(1, "nothing lost: every added job exists and ended done, or failed as planned"),
           Invariant(2, "no done job ran again, and no OK return was lost without a fault"),
           Invariant(3, "no limit exceeded at any moment (concurrency, group_concurrency, rate, slots, "
                        "one live attempt per job)"),
           Invariant(4, "no kept step ran twice"),
           Invariant(5, "no attempt failed by a timeout it did not reach, and none ran past it"),
           Invariant(6, "process counts add up: SIGTERM exits 0, SIGKILL dies by 9, nobody dies alone"),
           Invariant(7, "stats() counts the jobs the store lists, per queue and state")]
    i1, i2, i3, i4, i5, i6, i7 = inv
    if stats is not None:
        for name in queues:
            listed = Counter("queued" if f["state"] in ("scheduled", "waiting") else f["state"]
                             for f in finals.values() if f["queue"] == name)
            got = stats.get(name, {})
            counted = {"queued": got.get("scheduled", 0) + got.get("waiting", 0),
                       **{k: got.get(k, 0) for k in ("running", "done", "failed")}}
            if counted != {k: listed.get(k, 0) for k in counted}:
                i7.add(f"{name}: stats() says {counted}, the jobs listed are {dict(listed)}")
    notes: list[str] = list(anomalies)
    if bad_lines:
        notes.append(f"{bad_lines} witness line(s) did not parse")

    # 1. Nothing lost.
    for job, rec in added.items():
        f = finals.get(job)
        if f is None:
            i1.add(f"{rec['q']}/{job} was added (add returned at {rel(rec['t'])}) and the store does not have it")
            continue
        if f["state"] not in ("done", "failed"):
            i1.add(f"{f['queue']}/{job} is still {f['state']} (attempt {f['attempt']}) after the drain")
            continue
        if f["state"] == "failed":
            kf, err = f["attempt"], (f.get("error") or "")
            last = [r for r in by_job.get(job, []) if r.a == kf]
            if err.startswith("planned fail") and any(r.outcome == "fail" for r in last):
                continue
            if err.startswith("timeout") and kf >= f.get("attempts", 20) and any(r.slow for r in last):
                continue
            i1.add(f"{f['queue']}/{job} failed at attempt {kf} against its plan {plan_of(job)}: "
                   f"{err.splitlines()[0] if err else err!r}")
    interrupted = [j for j in adding if j not in added]
    for job in interrupted:
        f = finals.get(job)
        if f is not None and f["state"] not in ("done", "failed"):
            i1.add(f"{f['queue']}/{job} (its add never returned, but it exists) is still {f['state']} after the drain")
    for job, f in finals.items():
        if job not in adding:
            i1.add(f"the store holds {f['queue']}/{job}, which no producer added")
    for job in by_job:
        if job not in adding:
            i1.add(f"a handler ran {job}, which no producer added")

    # 2. No done job ran again; an OK (or fail) return that the store did not settle had a fault after it.
    for job, f in finals.items():
        jr = by_job.get(job, [])
        kf = f["attempt"]
        if f["state"] == "done":
            oks = [r for r in jr if r.a == kf and r.outcome == "ok"]
            if not oks:
                i2.add(f"{f['queue']}/{job} was settled done at attempt {kf}, but no run of attempt {kf} returned OK; "
                       f"its runs: " + "; ".join(r.describe(rel) for r in jr))
                continue
            done_at = min(r.e for r in oks)
            for r in jr:
                if r.a > kf:
                    i2.add(f"{f['queue']}/{job} was settled done at attempt {kf} (OK at {rel(done_at)}), "
                           f"yet attempt {r.a} began: {r.describe(rel)}")
                elif r.a == kf and r.b > done_at:
                    i2.add(f"{f['queue']}/{job} attempt {kf} returned OK at {rel(done_at)} and ran again: "
                           f"{r.describe(rel)}")
        if f["state"] not in ("done", "failed"):
            continue
        for r in jr:
            if r.outcome not in ("ok", "fail") or r.a >= kf:
                continue
            # This run's answer would have ended the job; the job went on. Allowed where its settlement
            # may have been lost: a kill, stop or SIGTERM of its process soon after; its process stopped
            # during the run (its lease ran out); or a handler past its timeout (its answer is ignored: a def
            # handler's thread, or an async one whose loop was late to cancel it).
            if proc(r.pid).faults_in(r.b, r.e + bounds.settle_window, bounds.stall_lease) or stale(r):
                continue
            if r.elapsed is not None and r.elapsed >= timeout_of(r.q) - bounds.eps:
                continue
            nxt = next((x for x in jr if x.a > r.a), None)
            i2.add(f"{r.q}/{job} attempt {r.a} returned {r.outcome.upper()} and no kill, stop or SIGTERM of pid "
                   f"{r.pid} followed within {bounds.settle_window:g}s, yet the job went on to attempt "
                   f"{nxt.a if nxt else '?'}:\n{r.describe(rel)}" + (f"\nthen {nxt.describe(rel)}" if nxt else ""))

    # 3. No limit exceeded. Intervals are [begin, end] of runs; a killed process's open run ends at its
    # kill; a def handler's interval lasts until its thread returns, timed out or not (JOB-09). A run of a
    # process that was stopped during it, or just before it began (between its claim and its begin),
    # is left out: its lease ran out and its place went to another run, as the contracts allow.
    peaks: dict[str, str] = {}
    for q, spec in queues.items():
        qruns = [r for r in runs if r.q == q]
        live = [r for r in qruns if not stale(r)]
        if "concurrency" in spec:
            limit = spec["concurrency"]
            peak, episodes = overlaps([(r.b, r.end, r) for r in live], limit)
            peaks[f"{q} concurrency"] = f"{peak} of {limit}"
            for t, rs in episodes:
                i3.add(f"{q}: {len(rs)} runs at once at {rel(t)}, concurrency={limit}:\n"
                       + "\n".join(r.describe(rel) for r in rs))
        if "group_concurrency" in spec:
            limit = spec["group_concurrency"]
            groups: dict[str, list] = defaultdict(list)
            for r in live:
                if r.grp is not None:
                    groups[r.grp].append((r.b, r.end, r))
            peak = 0
            for grp, ivs in sorted(groups.items()):
                p, episodes = overlaps(ivs, limit)
                peak = max(peak, p)
                for t, rs in episodes:
                    i3.add(f"{q} group {grp}: {len(rs)} runs at once at {rel(t)}, group_concurrency={limit}:\n"
                           + "\n".join(r.describe(rel) for r in rs))
            peaks[f"{q} group_concurrency"] = f"{peak} of {limit} ({len(groups)} groups)"
        if "rate" in spec:
            # The store counts a start when it claims, at a time read inside the claim's transaction,
            # and no window of `period` holds more than `count` of those times (LIM-03). A handler
            # begins after its claim commits, at most claim_lag later. So the begins inside any window
            # of (period - claim_lag) come from claims inside a window of `period`: at most `count`.
            # A begin in a process just continued after a SIGSTOP, or whose loop just stalled, may come
            # from a claim made before the stop or the stall: begins from the start of either to
            # claim_lag after its end are left out.
            count, period = spec["rate"]
            width = period - bounds.claim_lag

            def after_cont(r: Run) -> bool:
                p = proc(r.pid)
                windows = p.stops + p.stalls + [(s, c) for s, c, _ in p.frozen]
                return any(s <= r.b <= c + bounds.claim_lag for s, c in windows)
            begins = sorted(((r.b, r) for r in qruns if not after_cont(r)), key=lambda pair: pair[0])  # equal times tie
            peak, episodes = busiest_windows(begins, width, count)
            peaks[f"{q} rate"] = f"{peak} begins in the busiest {width:g}s window, rate {count}/{period:g}s"
            for t, rs in episodes:
                i3.add(f"{q}: {len(rs)} handlers began within {width:g}s from {rel(t)}, rate={count}/{period:g}s "
                       f"(claim-to-begin bound {bounds.claim_lag:g}s):\n" + "\n".join(r.describe(rel) for r in rs[:count + 3])
                       + ("\n..." if len(rs) > count + 3 else ""))
        # A worker runs at most SLOTS handlers of a queue at once; a def handler past its timeout keeps
        # its slot until its thread returns (JOB-09). Every run of the process counts, stopped or not.
        by_pid: dict[int, list] = defaultdict(list)
        for r in qruns:
            by_pid[r.pid].append((r.b, r.end, r))
        for pid, ivs in sorted(by_pid.items()):
            _, episodes = overlaps(ivs, SLOTS)
            for t, rs in episodes:
                i3.add(f"{q}: pid {pid} ran {len(rs)} handlers at once at {rel(t)}, serve(workers={SLOTS}):\n"
                       + "\n".join(r.describe(rel) for r in rs))
    # One live attempt per job (JOB-05: a lease is its attempt): two runs of one job never overlap,
    # stalled ones left out. A timed-out attempt has ended at its timeout even where a def handler's
    # thread still runs, so each run counts here until min(its end, begin + timeout).
    for job, jr in by_job.items():
        ivs = []
        for r in jr:
            if stale(r):
                continue
            ivs.append((r.b, min(r.end, r.b + timeout_of(r.q)), r))
        _, episodes = overlaps(ivs, 1)
        for t, rs in episodes:
            i3.add(f"{jr[0].q}/{job}: two attempts ran at once at {rel(t)} (a lease is its attempt):\n"
                   + "\n".join(r.describe(rel) for r in rs))

    # 4. No kept step ran twice.
    steps: dict[tuple[str, str], list[tuple[float, str, Run]]] = defaultdict(list)
    made: dict[tuple[str, str], set] = defaultdict(set)
    fn_runs = 0
    for r in runs:
        for name, t, tok in r.answers:
            steps[(r.id, name)].append((t, tok, r))
        for name, t, tok in r.fns:
            made[(r.id, name)].add(tok)
            fn_runs += 1
    done_at: dict[str, float] = {}
    for job, f in finals.items():
        if f["state"] == "done":
            oks = [r.e for r in by_job.get(job, []) if r.a == f["attempt"] and r.outcome == "ok"]
            if oks:
                done_at[job] = min(oks)
    reused = 0
    for (job, name), answers in steps.items():
        answers.sort(key=lambda x: x[0])
        tokens = {tok for _, tok, _ in answers}
        if len(tokens) > 1:
            i4.add(f"{job} step {name!r}: attempts got different answers back:\n"
                   + "\n".join(f"{tok} at {rel(t)} in {r.describe(rel)}" for t, tok, r in answers))
        for t, tok, r in answers:
            if tok not in made[(job, name)]:
                i4.add(f"{job} step {name!r}: answer {tok} came back that no step fn made ({r.describe(rel)})")
            if not any(n == name and k == tok for n, _, k in r.fns):
                reused += 1
    for r in runs:
        for name, t_fn, tok in r.fns:
            answers = steps.get((r.id, name), [])
            kept_by = [(t, k, o) for t, k, o in answers if k != tok]
            if not kept_by:
                continue
            t_kept, tok_kept, other = kept_by[0]
            call = r.calls.get(name, t_fn)
            if call > t_kept and call > done_at.get(r.id, INF):
                continue  # a stale claim run after the job was done: its steps were dropped with it (JOB-06)
            if call > t_kept:
                # An attempt had its answer back before this run even called run.step: the answer was
                # kept then, so run.step had to return it without calling fn (JOB-06).
                i4.add(f"{r.q}/{r.id} step {name!r} ran its fn at {rel(t_fn)} although its answer {tok_kept} was "
                       f"kept and returned at {rel(t_kept)}, before this call of run.step at {rel(call)}:\n"
                       f"{r.describe(rel)}\nkept by {other.describe(rel)}")
            elif t_fn > t_kept and not stale(r, t_fn) and not (
                    r.kind == "def" and t_fn - r.b >= timeout_of(r.q) - bounds.eps):
                # It called run.step before the answer was kept and ran fn after: it and the keeper were
                # both live at once, which only a stalled process or a def thread past its timeout may be.
                i4.add(f"{r.q}/{r.id} step {name!r} ran its fn at {rel(t_fn)} after another attempt had its answer "
                       f"{tok_kept} back at {rel(t_kept)}, in a run that was neither stalled nor past its timeout:\n"
                       f"{r.describe(rel)}\nkept by {other.describe(rel)}")

    # 5. Timeouts stop the attempts past them, and only those.
    timeouts = 0
    for r in runs:
        tmo = timeout_of(r.q)
        p = proc(r.pid)
        for t, elapsed, flag, via in r.cancels:
            if elapsed >= tmo - bounds.eps:
                if not stale(r, t):
                    timeouts += 1
                continue
            if stale(r, t):
                continue  # its lease ran out while stopped: the handler was told (run.cancelled, JOB-12)
            if any(tt + GRACE - bounds.eps <= t for tt, _ in p.terms):
                continue  # still running past the grace period after SIGTERM: cancelled as the manual says
            what = "was cancelled" if via == "CancelledError" else "saw run.cancelled turn true"
            i5.add(f"{r.q}/{r.id} attempt {r.a} {what} {elapsed:.3f}s after it began, before its timeout of "
                   f"{tmo:g}s, with no stop or SIGTERM of pid {r.pid} (run.cancelled={flag}):\n{r.describe(rel)}")
        if r.kind == "def" and r.elapsed is not None and r.elapsed >= tmo and not r.cancels:
            timeouts += 1
        if (r.kind == "async" and r.outcome not in (None, "cancelled") and r.elapsed is not None
                and r.elapsed > tmo + bounds.late and not stale(r)):
            i5.add(f"{r.q}/{r.id} attempt {r.a} ran {r.elapsed:.3f}s, past its timeout of {tmo:g}s, and was not "
                   f"stopped ({r.outcome}){' (planned slow)' if r.slow else ''}:\n{r.describe(rel)}")
    for job, f in finals.items():
        jr = [r for r in by_job.get(job, []) if r.a == f["attempt"]]
        tmo = timeout_of(f["queue"]) if f["queue"] in queues else INF
        if f["state"] == "done":
            # The store's clock started the attempt before the handler's begin was written, and it settles
            # after the handler's end was written: it sees at least the elapsed time the witness sees.
            oks = [r for r in jr if r.outcome == "ok"]
            if oks and all(r.elapsed is not None and r.elapsed > tmo + bounds.eps for r in oks):
                i5.add(f"{f['queue']}/{job} was settled done by attempt {f['attempt']}, whose handler answered after "
                       f"its timeout of {tmo:g}s (a late answer must be ignored, JOB-09):\n"
                       + "\n".join(r.describe(rel) for r in oks))
        if f["state"] == "failed" and (f.get("error") or "").startswith("timeout"):
            if f["attempt"] not in plan_of(job).get("slow", []):
                i5.add(f"{f['queue']}/{job} failed with a timeout at attempt {f['attempt']}, which its plan made fast "
                       f"{plan_of(job)}:\n" + "\n".join(r.describe(rel) for r in jr))

    # 6. Process counts.
    starts = Counter(p.role for p in procs.values())
    kills = Counter(p.role for p in procs.values() for _ in p.kills)
    stops = Counter(p.role for p in procs.values() for _ in p.stops)
    terms = Counter(p.role for p in procs.values() for _, final in p.terms if not final)
    finals_terms = Counter(p.role for p in procs.values() for _, final in p.terms if final)
    slowest_exit = 0.0
    for p in sorted(procs.values(), key=lambda p: p.start):
        who = f"{p.role} pid {p.pid} (started {rel(p.start)})"
        tail = f"\nits log ends: {p.log_tail}" if p.log_tail else ""
        if p.not_ready:
            i6.add(f"{who} never said it was ready{tail}")
        if p.died:
            i6.add(f"{who} exited on its own at {rel(p.exit_t)} with status {p.rc}{tail}")
            continue
        if p.kills:
            if p.rc != -9:
                i6.add(f"{who} was sent SIGKILL at {rel(p.kills[0])} and ended with status {p.rc}, not by signal 9")
        elif p.terms:
            t_term = p.terms[0][0]
            if p.term_timeout:
                i6.add(f"{who} was sent SIGTERM at {rel(t_term)} and had not exited {GRACE + bounds.exit_margin:g}s "
                       f"later (grace {GRACE:g}s){tail}")
            elif p.rc != 0:
                i6.add(f"{who} was sent SIGTERM at {rel(t_term)} and exited with status {p.rc}, not 0{tail}")
            elif p.exit_t is not None:
                slowest_exit = max(slowest_exit, p.exit_t - t_term)
                if p.exit_t - t_term > GRACE + bounds.exit_margin:
                    i6.add(f"{who} took {p.exit_t - t_term:.1f}s to exit after SIGTERM (grace {GRACE:g}s)")
        elif p.exit_t is None:
            i6.add(f"{who} was still running when the soak ended")

    # Figures.
    outcomes = Counter(r.outcome or "open" for r in runs)
    states = Counter(f["state"] for f in finals.values())
    failed_by = Counter((f.get("error") or "").split(":")[0].split("\n")[0][:40]
                        for f in finals.values() if f["state"] == "failed")
    lags = sorted(r.lag for r in runs if r.e is not None and not stale(r))
    run_secs = max(t_faults_end - t_start, 1e-9)
    done_during = sum(1 for f in finals.values() if f["state"] == "done")
    interrupted_present = sum(1 for j in interrupted if j in finals)
    figures = {
        "soak (faults on)": f"{run_secs:.1f}s",
        "drain": f"{t_drained - t_faults_end:.1f}s",
        "jobs added (add returned)": len(added),
        "adds interrupted by a kill": f"{len(interrupted)} ({interrupted_present} of them exist, DUR-02)",
        "jobs done": states.get("done", 0),
        "jobs failed": f"{states.get('failed', 0)} " + (
            "(" + ", ".join(f"{k or '?'}: {v}" for k, v in failed_by.most_common()) + ")" if failed_by else ""),
        "handler runs (witness)": len(runs),
        "attempts counted (store)": sum(f["attempt"] for f in finals.values()),
        "runs by outcome": ", ".join(f"{k} {v}" for k, v in outcomes.most_common()),
        "retries (raise + run.retry)": outcomes.get("raise", 0) + outcomes.get("retry", 0),
        "snoozes": outcomes.get("snooze", 0),
        "timeouts (runs stopped or past their timeout)": timeouts,
        "steps: fn calls / answers / answers given back kept": f"{fn_runs} / {sum(len(v) for v in steps.values())} / {reused}",
        "worker starts / SIGKILL / SIGSTOP / SIGTERM (+ final)":
            f"{starts.get('worker', 0)} / {kills.get('worker', 0)} / {stops.get('worker', 0)} / "
            f"{terms.get('worker', 0)} (+{finals_terms.get('worker', 0)})",
        "producer starts / SIGKILL / SIGTERM": f"{starts.get('producer', 0)} / {kills.get('producer', 0)} / "
                                               f"{terms.get('producer', 0) + finals_terms.get('producer', 0)}",
        "slowest exit after SIGTERM": f"{slowest_exit:.2f}s (grace {GRACE:g}s)",
        "throughput (done jobs / soak time)": f"{done_during / run_secs:.1f} jobs/s",
        "handler sleep overshoot (p50 / p99 / max)":
            (f"{pct(lags, 50) * 1000:.1f} / {pct(lags, 99) * 1000:.1f} / {lags[-1] * 1000:.1f} ms" if lags else "-"),
    }
    stalls = [(s, c, p) for p in procs.values() for s, c in p.stalls]
    foreign = [(s, c, p) for s, c, p in stalls if not p.stopped_during(s, c)
               and any(q.stopped_during(s, c) for q in procs.values() if q is not p)]
    long_stalls = [x for x in stalls if x[1] - x[0] >= bounds.stall_lease]
    figures["worker loop stalls >= 0.1s (>= %gs)" % bounds.stall_lease] = (
        f"{len(stalls)} ({len(long_stalls)}), longest {max((c - s for s, c, _ in stalls), default=0):.2f}s; "
        f"{len(foreign)} in a process not stopped itself while another was")
    held = sorted((s, c) for p in procs.values() for s, c in p.held)
    figures["SIGSTOPs that held the write lock (froze every worker)"] = (
        f"{len(held)} of {sum(len(p.stops) for p in procs.values())}"
        + (": " + ", ".join(f"{c - s:.1f}s from {rel(s)}" for s, c in held) if held else ""))
    cut = [e for e in events if e["ev"] in ("cut_done", "cut_all_done")]
    if cut:
        figures["sessions cut: of one worker / of every process (sessions ended)"] = (
            f"{sum(e['ev'] == 'cut_done' for e in cut)} ({sum(e['sessions'] for e in cut if e['ev'] == 'cut_done')})"
            f" / {sum(e['ev'] == 'cut_all_done' for e in cut)}"
            f" ({sum(e['sessions'] for e in cut if e['ev'] == 'cut_all_done')})")
    restarts = [(e, nxt) for e, nxt in zip(events, events[1:]) if e["ev"] == "restart" and nxt["ev"] == "restarted"]
    if restarts:
        figures["server restarts (time until it accepted connections again)"] = ", ".join(
            f"-m {e.get('mode')} {nxt['t'] - e['t']:.2f}s at {rel(e['t'])}" for e, nxt in restarts)
    failed_adds = sum(1 for r in records if r.get("ev") == "add_failed")
    if failed_adds:
        figures["adds that raised Unavailable (made again)"] = failed_adds
    for k, v in peaks.items():
        figures[f"peak {k}"] = v
    return Result(inv, figures, notes)


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def overlaps(intervals: list[tuple[float, float, Any]], limit: int) -> tuple[int, list[tuple[float, list]]]:
    """The most intervals open at once; and each moment the count rose above ``limit``, with the open ones.

    An interval that ends at the moment another begins does not overlap it.
    """
    events = []
    for i, (s, e, _) in enumerate(intervals):
        events.append((s, 1, i))
        events.append((e, 0, i))
    events.sort(key=lambda x: (x[0], x[1]))
    now: set[int] = set()
    peak, episodes, over = 0, [], False
    for t, kind, i in events:
        if kind == 1:
            now.add(i)
            peak = max(peak, len(now))
            if len(now) > limit and not over:
                over = True
                episodes.append((t, sorted((intervals[j][2] for j in now), key=lambda r: getattr(r, "b", 0))))
        else:
            now.discard(i)
            if len(now) <= limit:
                over = False
    return peak, episodes


def busiest_windows(begins: list[tuple[float, Any]], width: float, limit: int) -> tuple[int, list[tuple[float, list]]]:
    """The most begins in any half-open window [t, t + width); and the windows holding more than ``limit``
    (one per crowded stretch)."""
    times = [t for t, _ in begins]
    peak, episodes, until = 0, [], -INF
    for i, t in enumerate(times):
        j = bisect.bisect_left(times, t + width)
        n = j - i
        peak = max(peak, n)
        if n > limit and t >= until:
            episodes.append((t, [r for _, r in begins[i:j]]))
            until = t + width
    return peak, episodes


if __name__ == "__main__":
    import sys
    result = check_folder(sys.argv[1])
    print(result.report())
    sys.exit(0 if result.ok else 1)
