"""A worker process for the benchmarks: opens a store, serves it, says what it measured.

It speaks in lines on stdout: ``ready`` once the store is open and the
handler registered (nothing timed yet), then, after the parent writes ``go``
on stdin, ``result {json}``. Modes:

- ``drain PATH --handler async|sync|steps-async|steps-sync``: ``run_until_idle()``; jobs, seconds,
  writer commits, memory.
- ``groups PATH --hot GROUP --others N``: ``serve()`` until the N jobs outside
  the hot group have run, then ``--hot-seconds`` more with the hot group alone;
  then stops itself with SIGTERM.
- ``latency PATH``: ``serve()``; each handler start prints ``lat N SECONDS`` (from
  the time the payload carries), until SIGTERM.
- ``hold PATH --leases N [--lease SECONDS]``: ``serve(workers=N)`` with handlers that never end;
  prints ``held N`` once N run. The parent then kills it with SIGKILL.
- ``scale PATH --workers N --sleep SECONDS --tally FILE --slot K``: on "go", ``serve(workers=N)`` with
  handlers that await ``asyncio.sleep(SECONDS)`` (I/O-bound jobs) and count themselves in the tally,
  until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tinystore  # noqa: E402
from common import QUEUE, CommitCounter, Tally, memory  # noqa: E402


def _one() -> int:
    return 1


def handler_for(kind: str, steps: int, count: Callable[[], Any]) -> Any:
    """A no-op handler (async or sync), or one that keeps ``steps`` steps; each calls ``count()`` at its end."""
    if kind == "async":
        async def noop(payload: Any, run: Any) -> None:
            count()
        return noop
    if kind == "sync":
        def noop_sync(payload: Any, run: Any) -> None:
            count()
        return noop_sync
    if kind == "steps-async":
        async def stepped(payload: Any, run: Any) -> None:
            for i in range(steps):
                await run.step(f"s{i}", _one)
            count()
        return stepped
    if kind == "steps-sync":
        def stepped_sync(payload: Any, run: Any) -> None:
            for i in range(steps):
                run.step(f"s{i}", _one)
            count()
        return stepped_sync
    raise SystemExit(f"unknown handler {kind!r}")


def wait_for_go() -> None:
    print("ready", flush=True)
    line = sys.stdin.readline()
    if line.strip() != "go":
        raise SystemExit("the parent did not say go")


def drain(args: argparse.Namespace) -> None:
    """Time ``run_until_idle()``; the drain ends when the tally reaches ``--expect`` (every job ran).

    ``run_until_idle()`` runs in a thread of its own: where it returns, its
    time is reported too; where it has not returned ``--grace`` seconds after
    the last job ran, that is reported and the process exits without closing.
    """
    counter = CommitCounter.install()
    tally = Tally(args.tally, args.slot)
    store = tinystore.open(args.path, durability=args.durability)
    all_ran = threading.Event()
    ran: dict[str, float] = {}

    def count() -> None:
        if tally.add() >= args.expect and not all_ran.is_set():
            ran["at"] = time.time()
            all_ran.set()

    store.queue(QUEUE).work(handler_for(args.handler, args.steps, count))
    before = memory()
    wait_for_go()
    commits = counter.read()
    began = time.time()
    returned = threading.Event()

    def until_idle() -> None:
        store.run_until_idle()
        ran["returned"] = time.time()
        returned.set()

    threading.Thread(target=until_idle, daemon=True).start()
    while not all_ran.wait(0.05):  # the job that completes the tally may run in the other process
        if tally.total() >= args.expect:
            break
    ended = ran.get("at", time.time())  # the parent takes the earliest end: the exact one
    commits = None if commits is None else counter.read() - commits
    finished = returned.wait(args.grace) or "returned" in ran
    after = memory()
    print("result " + json.dumps({
        "began": began, "ended": ended, "handled": tally.mine(), "commits": commits,
        "until_idle_returned": finished,
        "until_idle_after_last_s": (ran["returned"] - ended) if "returned" in ran else None,
        "rss_before_mib": before["rss_mib"], "rss_after_mib": after["rss_mib"],
        "peak_rss_mib": after["peak_rss_mib"]}), flush=True)
    if not finished:
        os._exit(0)  # run_until_idle() is still running: do not wait for it
    store.close()


def groups(args: argparse.Namespace) -> None:
    """Serve until the jobs outside the hot group have all run; then the hot group alone for a while."""
    counter = CommitCounter.install()
    store = tinystore.open(args.path, durability=args.durability)
    queue = store.queue(QUEUE)
    state: dict[str, Any] = {"others": 0, "hot": 0, "began": 0.0}

    def report() -> None:
        alone = time.time() - state["ended"]
        print("result " + json.dumps({
            "began": state["began"], "ended": state["ended"], "others": state["others"],
            "hot": state["hot_then"], "hot_alone": state["hot"] - state["hot_then"], "hot_alone_seconds": alone,
            "commits": state["commits"], **memory()}), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    @queue.work
    async def handle(payload: Any, run: Any) -> None:
        if run.group == args.hot:
            state["hot"] += 1
            return
        state["others"] += 1
        if state["others"] == args.others:
            state.update(ended=time.time(), hot_then=state["hot"], commits=counter.read())
            asyncio.get_running_loop().call_later(args.hot_seconds, report)

    wait_for_go()
    state["began"] = time.time()
    store.serve()
    store.close()


def latency(args: argparse.Namespace) -> None:
    store = tinystore.open(args.path, durability=args.durability)
    queue = store.queue(QUEUE)

    @queue.work
    async def handle(payload: Any, run: Any) -> None:
        started = time.time()
        print(f"lat {payload['n']} {started - payload['t']:.9f}", flush=True)

    print("ready", flush=True)
    store.serve()
    store.close()


def hold(args: argparse.Namespace) -> None:
    store = tinystore.open(args.path, durability=args.durability)
    queue = store.queue(QUEUE) if args.lease is None else store.queue(QUEUE, lease=args.lease)
    running = [0]

    @queue.work
    async def handle(payload: Any, run: Any) -> None:
        running[0] += 1
        if running[0] == args.leases:
            print(f"held {running[0]}", flush=True)
        await asyncio.Event().wait()  # holds its lease until the process dies

    print("ready", flush=True)
    store.serve(workers=args.leases)


def scale(args: argparse.Namespace) -> None:
    tally = Tally(args.tally, args.slot)
    store = tinystore.open(args.path, durability=args.durability)

    @store.queue(QUEUE).work
    async def handle(payload: Any, run: Any) -> None:
        await asyncio.sleep(args.sleep)
        tally.add()

    wait_for_go()
    store.serve(workers=args.workers)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["drain", "groups", "latency", "hold", "scale"])
    parser.add_argument("path")
    parser.add_argument("--durability", default="full")
    parser.add_argument("--handler", default="async")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--hot", default="hot")
    parser.add_argument("--others", type=int, default=0)
    parser.add_argument("--hot-seconds", type=float, default=2.0, help="then serve the hot group alone this long")
    parser.add_argument("--leases", type=int, default=1_000)
    parser.add_argument("--lease", type=float, help="hold: the queue's lease, in seconds (renewed every lease/2)")
    parser.add_argument("--workers", type=int, default=20, help="scale: serve(workers=N)")
    parser.add_argument("--sleep", type=float, default=0.050, help="scale: what each handler awaits, in seconds")
    parser.add_argument("--tally", help="the shared file that counts jobs run across processes")
    parser.add_argument("--slot", type=int, default=0)
    parser.add_argument("--expect", type=int, default=0, help="jobs in the store: the drain ends when all ran")
    parser.add_argument("--grace", type=float, default=3.0, help="seconds to wait for run_until_idle() to return")
    args = parser.parse_args()
    {"drain": drain, "groups": groups, "latency": latency, "hold": hold, "scale": scale}[args.mode](args)


if __name__ == "__main__":
    main()
