"""The soak's child processes: a worker serving every queue, or a producer adding jobs.

    python soak_child.py worker TARGET WITNESS_DIR
    python soak_child.py producer TARGET WITNESS_DIR --prefix p1 --rate 50 --seed 1

TARGET is what ``tinystore.open`` takes: the store's file, or a PostgreSQL URL.

Each writes its witness to ``WITNESS_DIR/<role>-<pid>.jsonl``: one JSON line
per record, appended with a single ``os.write`` on a descriptor opened with
``O_APPEND``, so a record is in the file whole or not at all, whenever the
process is killed. Every record has ``ev`` (what happened), ``t``
(``time.time()``) and ``pid``; records about a run also have ``q`` (queue),
``id`` and ``a`` (``run.attempt``). The witness is written beside the store,
never through it: it says what the handlers did, whatever the store says.

Worker records: ``ready`` (the store is open and the handlers registered,
just before ``serve()``), ``begin`` (first line of a handler, with ``grp``
and ``kind``), ``step_call`` (just before ``run.step``), ``step_fn`` (the
step's fn was called; ``tok`` is the unique token it returns), ``step_ans``
(what ``run.step`` returned), ``slow`` (a planned past-timeout sleep begins),
``cancel`` (an async handler caught CancelledError, or a def handler saw
``run.cancelled`` turn true: ``elapsed`` since begin, ``flag`` the value of
``run.cancelled``, ``via``), ``end`` (last line of a handler: ``outcome`` ok,
raise, retry, fail, snooze, cancelled, stopped, conflict or error:<type>;
``elapsed``; ``lag``, the largest overshoot of the run's sleeps, a measure
of how late this process's loop or threads ran), ``stall`` (the event loop
woke a sleeping task late: ``start``, ``stop``, ``secs``; see watch_loop),
``exit``.

Producer records: ``ready``, ``adding`` (just before ``add``: id, queue,
plan, group, due time), ``add_failed`` (``add`` raised ``Unavailable``: the
connection was lost or the server restarted; ``error``; the same add is made
again, with the same id, as the manual says an application does), ``added``
(``add`` returned), ``exit``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import faulthandler
import json
import logging
import os
import random
import signal
import sys
import time
import uuid
from typing import Any, Callable

import tinystore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak_plan import ANSWER_DELAY, GRACE, QUEUES, SLOTS, SLOW, make_job, options, pick_queue  # noqa: E402


class Witness:
    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.pid = os.getpid()

    def rec(self, ev: str, **fields: Any) -> None:
        fields["ev"] = ev
        fields["t"] = time.time()
        fields["pid"] = self.pid
        os.write(self.fd, (json.dumps(fields, separators=(",", ":")) + "\n").encode())


def die_with_parent() -> None:
    """SIGKILL this process if the supervisor dies, so that no child outlives a crashed soak (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        os._exit(1)


async def watch_loop(w: "Witness", every: float = 0.05, late: float = 0.1) -> None:
    """Record each time this loop woke a sleeping task more than ``late`` seconds late: ``stall``.

    It sleeps as handlers do, so its lateness is theirs: a loop blocked in a
    call (a write waiting for SQLite's write lock, run on the loop's thread)
    or so busy that it takes several slow turns to wake a task. Such a loop
    is late to renew its leases, to begin a claimed handler and to fire a
    timeout, so the checker takes its stalls into account (a stop of the
    process itself shows as one too).
    """
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + every
        start = time.time() + every
        await asyncio.sleep(every)
        behind = loop.time() - due
        if behind > late:
            w.rec("stall", start=start, stop=start + behind, secs=round(behind, 4))


def watch_loops(w: "Witness") -> None:
    """Run ``watch_loop`` in every event loop this process makes (``store.serve()`` makes one).

    The loop's policy sees it made and hands it the watcher as its first callback, as an application
    sharing the loop would start a task of its own; nothing of tinystore changes.
    """
    class Policy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            loop = super().new_event_loop()
            loop.call_soon(lambda: loop.create_task(watch_loop(w)))
            return loop
    asyncio.set_event_loop_policy(Policy())


class Planned(Exception):
    """What a handler raises on an attempt its plan says raises."""


class StopEarly(Exception):
    """A def handler saw run.cancelled turn true and stops."""


def token() -> str:
    return uuid.uuid4().hex[:16]


class Rec:
    """The witness of one run of a handler."""

    def __init__(self, w: Witness, queue: str, kind: str, run: Any, payload: dict):
        self.w = w
        self.run = run
        self.base = {"q": queue, "id": run.id, "a": run.attempt}
        self.kind = kind
        self.stubborn = bool(payload.get("stubborn"))
        self.t0 = time.time()
        self.lag = 0.0
        self.saw_cancel = False
        w.rec("begin", grp=run.group, kind=kind, **self.base)

    def rec(self, ev: str, **fields: Any) -> None:
        self.w.rec(ev, **self.base, **fields)

    def cancel(self, via: str) -> None:
        self.saw_cancel = True
        self.rec("cancel", elapsed=time.time() - self.t0, flag=bool(self.run.cancelled), via=via)

    def end(self, outcome: str) -> None:
        self.rec("end", outcome=outcome, elapsed=time.time() - self.t0, lag=round(self.lag, 4))

    # async

    async def asleep(self, seconds: float) -> None:
        start = time.monotonic()
        await asyncio.sleep(seconds)
        self.lag = max(self.lag, time.monotonic() - start - seconds)

    async def astep(self, name: str, ms: int) -> bool:
        """``await run.step(name, fn)`` where fn sleeps ``ms``; True where fn ran in this call."""
        made: list[str] = []

        async def fn() -> str:
            tok = token()
            made.append(tok)
            self.rec("step_fn", name=name, tok=tok)
            if ms:
                await self.asleep(ms / 1000)
            return tok

        self.rec("step_call", name=name)
        answer = await self.run.step(name, fn)
        self.rec("step_ans", name=name, tok=answer)
        return bool(made)

    # def

    def dsleep(self, seconds: float) -> None:
        """Sleep in slices, watching run.cancelled: seen, it is recorded, and (unless stubborn) ends the run."""
        start = time.monotonic()
        end = start + seconds
        while True:
            if self.run.cancelled and not self.saw_cancel:
                self.cancel("flag")
                if not self.stubborn:
                    raise StopEarly()
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(0.02, left))
        self.lag = max(self.lag, time.monotonic() - start - seconds)

    def dstep(self, name: str, ms: int) -> bool:
        made: list[str] = []

        def fn() -> str:
            tok = token()
            made.append(tok)
            self.rec("step_fn", name=name, tok=tok)
            if ms:
                self.dsleep(ms / 1000)
            return tok

        self.rec("step_call", name=name)
        answer = self.run.step(name, fn)
        self.rec("step_ans", name=name, tok=answer)
        return bool(made)


def async_handler(w: Witness, queue: str) -> Callable[..., Any]:
    async def handler(payload: dict, run: tinystore.AsyncRun) -> Any:
        r = Rec(w, queue, "async", run, payload)
        outcome = "error:?"
        try:
            a = run.attempt
            if payload.get("snooze"):
                if await r.astep("snz", 0):
                    outcome = "snooze"
                    return run.snooze(ANSWER_DELAY)
            ms = payload["ms"]
            await r.astep("s0", ms[0])
            if a in payload.get("raise", ()):
                outcome = "raise"
                raise Planned("planned raise")
            if a in payload.get("retry", ()):
                outcome = "retry"
                return run.retry(ANSWER_DELAY)
            if a in payload.get("fail", ()):
                outcome = "fail"
                return run.fail("planned fail")
            if a in payload.get("slow", ()):
                r.rec("slow")
                await r.asleep(SLOW)
            for i, m in enumerate(ms[1:], 1):
                await r.astep(f"s{i}", m)
            outcome = "ok"
            return None
        except asyncio.CancelledError:
            outcome = "cancelled"
            r.cancel("CancelledError")
            raise
        except Planned:
            raise
        except tinystore.Conflict:
            outcome = "conflict"
            raise
        except BaseException as exc:
            outcome = f"error:{type(exc).__name__}"
            raise
        finally:
            r.end(outcome)
    return handler


def def_handler(w: Witness, queue: str) -> Callable[..., Any]:
    def handler(payload: dict, run: tinystore.Run) -> Any:
        r = Rec(w, queue, "def", run, payload)
        outcome = "error:?"
        try:
            a = run.attempt
            if payload.get("snooze"):
                if r.dstep("snz", 0):
                    outcome = "snooze"
                    return run.snooze(ANSWER_DELAY)
            ms = payload["ms"]
            r.dstep("s0", ms[0])
            if a in payload.get("raise", ()):
                outcome = "raise"
                raise Planned("planned raise")
            if a in payload.get("retry", ()):
                outcome = "retry"
                return run.retry(ANSWER_DELAY)
            if a in payload.get("fail", ()):
                outcome = "fail"
                return run.fail("planned fail")
            if a in payload.get("slow", ()):
                r.rec("slow")
                r.dsleep(SLOW)
            for i, m in enumerate(ms[1:], 1):
                r.dstep(f"s{i}", m)
            outcome = "ok"
            return None
        except StopEarly:
            outcome = "stopped"
            raise
        except Planned:
            raise
        except tinystore.Conflict:
            outcome = "conflict"
            raise
        except BaseException as exc:
            outcome = f"error:{type(exc).__name__}"
            raise
        finally:
            r.end(outcome)
    return handler


def worker(args: argparse.Namespace) -> int:
    w = Witness(os.path.join(args.witness, f"worker-{os.getpid()}.jsonl"))
    watch_loops(w)
    store = tinystore.open(args.target)
    for name, spec in QUEUES.items():
        q = store.queue(name, **options(name))
        q.work(async_handler(w, name) if spec["kind"] == "async" else def_handler(w, name))
    w.rec("ready")
    store.serve(workers=SLOTS, grace=GRACE)  # until SIGTERM: then it finishes within the grace
    store.close()
    w.rec("exit")
    return 0


def producer(args: argparse.Namespace) -> int:
    w = Witness(os.path.join(args.witness, f"producer-{os.getpid()}.jsonl"))
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))  # finish the add in progress, then exit 0
    store = tinystore.open(args.target)
    queues = {name: store.queue(name, **options(name)) for name in QUEUES}
    rng = random.Random(f"{args.seed}/{args.prefix}")
    w.rec("ready", prefix=args.prefix)
    period = 1.0 / args.rate
    next_at = time.monotonic()
    n = 0
    while not stopping:
        name = pick_queue(rng)
        plan, group, at = make_job(rng, name, time.time())
        job_id = f"{args.prefix}-{n:06d}"
        w.rec("adding", id=job_id, q=name, plan=plan, grp=group, at=at)
        state = add(w, queues[name], plan, job_id, at, group)
        w.rec("added", id=job_id, q=name, new=state.added)
        n += 1
        next_at += period
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -1.0:
            next_at = time.monotonic()  # fell behind (stopped, starved): go on at the rate, no catch-up burst
    store.close()
    w.rec("exit", added=n)
    return 0


def add(w: Witness, queue: tinystore.Queue, plan: dict, job_id: str, at: Any, group: Any) -> tinystore.JobState:
    """``queue.add``, made again with the same id until it returns (its id makes that safe)."""
    wait = 0.05
    while True:
        try:
            return queue.add(plan, id=job_id, at=at, group=group)
        except tinystore.Unavailable as exc:
            w.rec("add_failed", id=job_id, q=queue.name, error=str(exc)[:300])
            time.sleep(wait)
            wait = min(wait * 2, 1.0)


def main() -> int:
    die_with_parent()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the supervisor asks a hung child where it is
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["worker", "producer"])
    parser.add_argument("target")
    parser.add_argument("witness")
    parser.add_argument("--prefix", default="p1")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seed", default="1")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    return worker(args) if args.role == "worker" else producer(args)


if __name__ == "__main__":
    sys.exit(main())
