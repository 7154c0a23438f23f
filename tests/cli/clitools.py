"""The real ``tinystore`` command in child processes, and an application module for its workers.

``app`` writes ``app_jobs.py`` into the test's folder: a store on the file
named by TINYSTORE_TEST_DB (a URL, with TINYSTORE_TEST_DIRECT as ``direct=``
where set) and handlers that write a witness line (to a file,
then to stdout) when they start and finish. A ``gated`` handler then waits
for a byte on a pipe the test holds, so a test decides when it ends, and no
test sleeps to wait for a child: it waits for the line the child prints or logs.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Optional

import tinystore

TIMEOUT = 60  # generous: it bounds a broken test, a passing one never waits for it

# The options each queue of app_jobs.py is opened with, in the workers and in the tests alike.
OPTIONS: dict[str, dict[str, Any]] = {
    "echo": {"dedupe": "1h"},
    "gated": {"dedupe": "1h", "attempts": 3},
    "hang": {"attempts": 3},
    "boom": {"attempts": 2, "backoff": ("10ms", "10ms")},
}

APP = '''
import asyncio
import os

import tinystore

store = tinystore.open(os.environ["TINYSTORE_TEST_DB"], direct=os.environ.get("TINYSTORE_TEST_DIRECT"))
GATE = int(os.environ.get("TINYSTORE_TEST_GATE", "-1"))
OPTIONS = {options!r}


def witness(run, what):
    line = f"{{what}} {{run.queue}} {{run.id}} {{run.attempt}} {{os.getpid()}}"
    with open(os.environ["TINYSTORE_TEST_WITNESS"], "a") as f:
        f.write(line + "\\n")
    print(line, flush=True)


echo = store.queue("echo", **OPTIONS["echo"])
gated = store.queue("gated", **OPTIONS["gated"])
hang = store.queue("hang", **OPTIONS["hang"])
boom = store.queue("boom", **OPTIONS["boom"])


@echo.work
def echo_handler(payload, run):
    witness(run, "ran")


@gated.work
def gated_handler(payload, run):
    witness(run, "started")
    if run.attempt <= payload.get("gated_attempts", 1):
        os.read(GATE, 1)  # the test writes a byte when this handler may end
    witness(run, "finished")


@hang.work
async def hang_handler(payload, run):
    witness(run, "started")
    await asyncio.Event().wait()


@boom.work
def boom_handler(payload, run):
    run.step("fetch", lambda: {{"fetched": run.id}})
    raise ValueError(f"boom {{run.id}}")
'''


class Worker:
    """A ``tinystore worker`` child; threads read its stdout and stderr line by line as they come."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.pid = proc.pid
        self.out: list[str] = []
        self.err: list[str] = []
        self._cv = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                         for stream, lines in ((proc.stdout, self.out), (proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: Any, lines: list[str]) -> None:
        for raw in iter(stream.readline, b""):
            with self._cv:
                lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            lines.append("")  # the stream ended
            self._cv.notify_all()

    def wait_for(self, text: str, stream: str = "out", timeout: float = TIMEOUT) -> str:
        """The first line of stdout ("out") or stderr ("err") that contains ``text``, once the child wrote it."""
        lines = self.out if stream == "out" else self.err
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                found = next((line for line in lines if text in line), None)
                if found is not None:
                    return found
                ended = bool(lines) and lines[-1] == ""
                remaining = deadline - time.monotonic()
                if ended or remaining <= 0:
                    break
                self._cv.wait(remaining)
        raise AssertionError(f"the worker never wrote {text!r} on std{stream}; exit {self.proc.poll()}\n"
                             f"stdout:\n" + "\n".join(self.out) + "\nstderr:\n" + "\n".join(self.err))

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = TIMEOUT) -> int:
        code = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait()


class App:
    """The test's folder: the store file, app_jobs.py, the witness file, the gate, and ways to run the command."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.db = str(folder / "store.db")
        self.witness = folder / "witness.txt"
        (folder / "app_jobs.py").write_text(textwrap.dedent(APP.format(options=OPTIONS)))
        self.gate_read, self.gate_write = os.pipe()
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", TINYSTORE_TEST_DB=self.db,
                        TINYSTORE_TEST_WITNESS=str(self.witness), TINYSTORE_TEST_GATE=str(self.gate_read))
        self.workers: list[Worker] = []
        self.stores: list[tinystore.Store] = []

    def cli(self, *args: str, input: Optional[str] = None) -> subprocess.CompletedProcess:
        """Run ``tinystore ARGS`` to its end, as a script would."""
        return subprocess.run([sys.executable, "-m", "tinystore.cli", *args], cwd=self.folder, env=self.env,
                              input=input, capture_output=True, text=True, timeout=TIMEOUT)

    def cli_at_a_terminal(self, *args: str, answer: str) -> subprocess.CompletedProcess:
        """Run ``tinystore ARGS`` with a terminal (a pseudo-terminal) as its stdin, to which a person has
        typed ``answer``; its stdout and stderr are captured as ``cli``'s."""
        import pty
        typed, terminal = pty.openpty()
        try:
            os.write(typed, answer.encode("utf-8"))
            return subprocess.run([sys.executable, "-m", "tinystore.cli", *args], cwd=self.folder, env=self.env,
                                  stdin=terminal, capture_output=True, text=True, timeout=TIMEOUT)
        finally:
            os.close(typed)
            os.close(terminal)

    def cli_all(self, *commands: list[str]) -> list[subprocess.CompletedProcess]:
        """Run several ``tinystore`` commands at once, each to its end: quicker than one after another."""
        procs = [subprocess.Popen([sys.executable, "-m", "tinystore.cli", *args], cwd=self.folder, env=self.env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for args in commands]
        results = []
        for args, proc in zip(commands, procs):
            out, err = proc.communicate(timeout=TIMEOUT)
            results.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
        return results

    def worker(self, *args: str, target: str = "app_jobs:store") -> Worker:
        """Start ``tinystore worker TARGET ARGS``."""
        proc = subprocess.Popen([sys.executable, "-m", "tinystore.cli", "worker", target, *args],
                                cwd=self.folder, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(self.gate_read,))
        worker = Worker(proc)
        self.workers.append(worker)
        return worker

    def serving(self, *args: str) -> Worker:
        """A worker that has installed its signal handlers and serves."""
        worker = self.worker(*args)
        worker.wait_for("INFO tinystore.store: serving", "err")
        return worker

    def open(self) -> tinystore.Store:
        """The store, opened in the test's own process; its queues opened as the workers open them."""
        store = tinystore.open(self.db)
        for name, options in OPTIONS.items():
            store.queue(name, **options)
        self.stores.append(store)
        return store

    def release(self) -> None:
        """Let one gated handler end."""
        os.write(self.gate_write, b"x")

    def witnessed(self) -> list[str]:
        """Witness lines without the pid: "started gated g1 1"."""
        if not self.witness.exists():
            return []
        return [line.rsplit(" ", 1)[0] for line in self.witness.read_text().splitlines()]

    def dump(self, path: Optional[str] = None) -> list[str]:
        """Everything a SQLite file holds, as SQL text: equal dumps mean an unchanged store."""
        conn = sqlite3.connect(path or self.db)
        try:
            return list(conn.iterdump())
        finally:
            conn.close()

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        for store in self.stores:
            store.close()
        os.close(self.gate_read)
        os.close(self.gate_write)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The one line a refused command writes on stderr."""
    lines = result.stderr.splitlines()
    assert result.returncode != 0, result
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tinystore: error: "), lines[0]
    return lines[0]
