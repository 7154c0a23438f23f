"""The child process of the crash tests: it opens the store like any application would.

Not a test module: the tests run this file's text with ``python -c`` (see
conftest.py) and kill the process at the moment it says it reached. It says
where it is by printing one line at a time, with one ``write`` each so that
threads never interleave their lines.

    add  TARGET QUEUE [--count N] [--then-block]
        Add jobs job-0, job-1, ... (payload {"n": i}) one ``add`` at a time and
        print "added <id>" right after each ``add`` returned. --count 0 adds
        until killed. With --then-block, print "blocking" and wait forever.

    work TARGET WITNESS --queue NAME:sync|async [...] (--until-idle | --serve)
        Register a handler per queue and run them. --until-idle runs
        run_until_idle() then prints "idle" and closes the store; --serve
        serves as store.serve() does (SIGTERM stops it gracefully), prints
        "serving" once a SIGTERM would be handled, and "stopped" at the end.

TARGET is what ``tinystore.open`` takes: a file path, a URL.

Every run of a handler appends "start <queue> <id> <attempt> <pid>" to the
WITNESS file as its first act and "end ..." once its work is done: an append
file no crash of the store can touch. What a run does is read from its
payload, each a list of the attempts that do it:

    kill_on        SIGKILL its own process (after "start")
    block_on       print "started <id> <attempt>", then block forever
    wait_on        print "waiting <id> <attempt>", then wait for a line on stdin
    hang_after_on  write "end", print "handled <id> <attempt>", then block
                   forever: the work is done and the settlement never comes
    fail_on        after "end", print "failing <id> <attempt>" and answer
                   run.fail(...); otherwise a run that gets there is done

and "work", a number of seconds the run works (sleeps) before its "end";
"block_loop", a number of seconds an async run calls ``time.sleep`` for, on
its worker's event loop (the blocking call an ``async def`` must not make),
before its work: on the attempts of "block_loop_on" where given, else on all.
"""

import argparse
import asyncio
import os
import signal
import sys
import threading
import time

import tinystore


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["add", "work"])
    parser.add_argument("target")
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--then-block", action="store_true")
    parser.add_argument("--queue", action="append", default=[])
    parser.add_argument("--until-idle", action="store_true")
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    if args.mode == "add":
        add(args)
    else:
        work(args)


def add(args: argparse.Namespace) -> None:
    (queue_name,) = args.rest
    store = tinystore.open(args.target)
    queue = store.queue(queue_name)
    say("opened")
    i = 0
    while args.count == 0 or i < args.count:
        job = queue.add({"n": i}, id=f"job-{i}")
        say(f"added {job.id}")
        i += 1
    if args.then_block:
        say("blocking")
        threading.Event().wait()
    store.close()


def work(args: argparse.Namespace) -> None:
    (witness_path,) = args.rest
    witness = os.open(witness_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    pid = os.getpid()

    def record(phase: str, run) -> None:
        os.write(witness, f"{phase} {run.queue} {run.id} {run.attempt} {pid}\n".encode())

    def answer(payload, run):
        if run.attempt in payload.get("fail_on", ()):
            say(f"failing {run.id} {run.attempt}")
            return run.fail(f"attempt {run.attempt} answered fail")
        return None

    store = tinystore.open(args.target)
    for spec in args.queue:
        name, kind = spec.split(":")
        queue = store.queue(name)
        if kind == "sync":
            def handler(payload, run):
                record("start", run)
                if run.attempt in payload.get("kill_on", ()):
                    os.kill(pid, signal.SIGKILL)
                if run.attempt in payload.get("block_on", ()):
                    say(f"started {run.id} {run.attempt}")
                    threading.Event().wait()
                if run.attempt in payload.get("wait_on", ()):
                    say(f"waiting {run.id} {run.attempt}")
                    sys.stdin.readline()
                time.sleep(payload.get("work", 0))
                record("end", run)
                if run.attempt in payload.get("hang_after_on", ()):
                    say(f"handled {run.id} {run.attempt}")
                    threading.Event().wait()
                return answer(payload, run)
        else:
            async def handler(payload, run):
                record("start", run)
                if run.attempt in payload.get("kill_on", ()):
                    os.kill(pid, signal.SIGKILL)
                if run.attempt in payload.get("block_on", ()):
                    say(f"started {run.id} {run.attempt}")
                    await asyncio.Event().wait()
                if run.attempt in payload.get("wait_on", ()):
                    say(f"waiting {run.id} {run.attempt}")
                    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
                if run.attempt in payload.get("block_loop_on", [run.attempt]):
                    time.sleep(payload.get("block_loop", 0))
                await asyncio.sleep(payload.get("work", 0))
                record("end", run)
                if run.attempt in payload.get("hang_after_on", ()):
                    say(f"handled {run.id} {run.attempt}")
                    await asyncio.Event().wait()
                return answer(payload, run)
        queue.work(handler)
    if args.until_idle:
        store.run_until_idle()
        say("idle")
    elif args.serve:
        asyncio.run(serve(store))
        say("stopped")
    store.close()
    os.close(witness)


async def serve(store) -> None:
    """store.serve(), saying "serving" only once SIGTERM stops it gracefully rather than killing it."""
    serving = asyncio.ensure_future(store.serve_async(handle_signals=True))
    await asyncio.sleep(0)  # serve_async runs up to its first wait, its signal handlers installed
    say("serving")
    await serving


if __name__ == "__main__":
    main()
