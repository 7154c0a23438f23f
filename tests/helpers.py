"""Helpers for tests that run real child processes: start one, hear where it is, kill it.

A child says where it is by printing a line; ``wait_for_line`` waits for it.
The first time a child is listened to, one thread per pipe starts reading its
stdout (line by line, into a queue) and its stderr (into a buffer), and keeps
reading until the child ends. So no line is ever missed because it sat in a
buffer, and a child that writes a lot never blocks on a full pipe. From then
on, read the child through these helpers (``wait_for_line``, ``lines_of``,
``stderr_of``) or ``proc.communicate()``, which is replaced to return what the
readers did not hand out yet; never through ``proc.stdout`` directly.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import IO, Any, Callable, Optional

import pytest


def run_child(code: str, *args: str, timeout: float = 60, check: bool = False, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run ``code`` in a new Python process (a real process, to kill or to let die) and wait for it."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True,
                          text=True, timeout=timeout, check=check, **kwargs)


def start_child(code: str, *args: str, **kwargs: Any) -> subprocess.Popen:
    """Start ``code`` in a new Python process without waiting for it."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


_EOF = object()


class _Listener:
    """Reads a child's stdout lines into a queue and its stderr into a buffer, each in a thread."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: "queue.Queue[Any]" = queue.Queue()
        self.seen: list[str] = []  # every stdout line read so far, in order, handed out or not
        self.ended = False  # the stdout reader reached the end of the pipe and wait_for_line has seen it
        self._stderr: list[str] = []
        self._threads = []
        if proc.stdout is not None:
            self._threads.append(self._start(self._pump_lines, proc.stdout))
        if proc.stderr is not None:
            self._threads.append(self._start(self._pump_stderr, proc.stderr))

    @staticmethod
    def _start(target: Any, stream: IO[str]) -> threading.Thread:
        thread = threading.Thread(target=target, args=(stream,), name="child-reader", daemon=True)
        thread.start()
        return thread

    def _pump_lines(self, stream: IO[str]) -> None:
        try:
            for line in iter(stream.readline, ""):
                self.seen.append(line)
                self.lines.put(line)
        except (OSError, ValueError):  # the pipe was closed under us
            pass
        finally:
            self.lines.put(_EOF)

    def _pump_stderr(self, stream: IO[str]) -> None:
        try:
            for chunk in iter(lambda: stream.read(4096), ""):
                self._stderr.append(chunk)
        except (OSError, ValueError):
            pass

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def stderr(self) -> str:
        return "".join(self._stderr)

    def rest(self) -> str:
        """The stdout lines not handed out by wait_for_line yet (the end of the pipe is kept)."""
        out = []
        while True:
            try:
                item = self.lines.get_nowait()
            except queue.Empty:
                break
            if item is _EOF:
                self.lines.put(_EOF)
                break
            out.append(item)
        return "".join(out)


_listeners_lock = threading.Lock()


def _listener(proc: subprocess.Popen) -> _Listener:
    with _listeners_lock:
        listener = getattr(proc, "_test_listener", None)
        if listener is None:
            listener = proc._test_listener = _Listener(proc)  # type: ignore[attr-defined]
            proc.communicate = lambda input=None, timeout=None: _communicate(proc, input, timeout)  # type: ignore[method-assign]
        return listener


def _communicate(proc: subprocess.Popen, input: Optional[str], timeout: Optional[float]) -> tuple[str, str]:
    """``proc.communicate`` once the readers own the pipes: wait, then return what they did not hand out."""
    listener = _listener(proc)
    if input and proc.stdin is not None:
        proc.stdin.write(input)
    if proc.stdin is not None:
        proc.stdin.close()
    proc.wait(timeout)
    listener.join(10)
    return listener.rest(), listener.stderr()


def wait_for_line(proc: subprocess.Popen, expected: str, timeout: float = 30) -> str:
    """Read the child's stdout until a line starts with ``expected``: the child says where it is.

    The lines before it are consumed (``lines_of`` still has them). Returns the
    line stripped; raises AssertionError, with the child's stderr, when the child
    ends or ``timeout`` seconds pass first.
    """
    listener = _listener(proc)
    deadline = time.monotonic() + timeout
    while not listener.ended:
        try:
            line = listener.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is _EOF:
            listener.ended = True
            listener.lines.put(_EOF)  # later calls see the end too
            break
        if line.startswith(expected):
            return line.strip()
    if listener.ended:
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        listener.join(5)
        why = f"it ended (exit {proc.poll()}) first"
    else:
        why = f"within {timeout:g}s (exit {proc.poll()})"
    raise AssertionError(f"the child never printed {expected!r}: {why}; stderr:\n{listener.stderr()}")


def lines_of(proc: subprocess.Popen) -> list[str]:
    """Every stdout line the child printed so far (all of them once it ended), stripped."""
    listener = _listener(proc)
    if proc.poll() is not None:
        listener.join(10)
    return [line.strip() for line in list(listener.seen)]


def stderr_of(proc: subprocess.Popen) -> str:
    """What the child wrote to stderr so far (all of it once it ended)."""
    listener = _listener(proc)
    if proc.poll() is not None:
        listener.join(10)
    return listener.stderr()


def kill_child(proc: subprocess.Popen, timeout: float = 30) -> int:
    """SIGKILL the child now, as a crash or a power cut would end it, and wait until it is gone."""
    _listener(proc)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    return proc.wait(timeout)


def wait_child(proc: subprocess.Popen, timeout: float = 30) -> int:
    """Wait until the child ends by itself; its exit status (-N for signal N)."""
    _listener(proc)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the child did not end within {timeout:g}s; its output:\n"
                             + "\n".join(lines_of(proc)) + "\nstderr:\n" + stderr_of(proc)) from None


def django_python() -> str:
    """A Python that has Django 6 (which needs 3.12 or newer): this one, ``TINYSTORE_DJANGO_PYTHON``'s, or
    the checkout's ``.venv312`` (which ``.ci/run`` makes). Without one the test is skipped saying so,
    except under ``CI=true``, where that fails it."""
    try:
        if int(metadata.version("django").split(".")[0]) >= 6:
            return sys.executable
    except metadata.PackageNotFoundError:
        pass
    python = os.environ.get("TINYSTORE_DJANGO_PYTHON")
    if python:
        return python
    venv312 = Path(__file__).resolve().parent.parent / ".venv312" / "bin" / "python"
    if venv312.exists():
        return str(venv312)
    message = (f"Django 6 is not installed for Python {sys.version.split()[0]} (it needs 3.12 or newer): "
               f"set TINYSTORE_DJANGO_PYTHON to a Python that has it, or make .venv312 as .ci/run does")
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


class Background:
    """Run ``fn`` in a thread; ``join`` fails the test when it does not end in time, and re-raises its error."""

    def __init__(self, fn: Callable[[], Any]):
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except BaseException as exc:  # handed to join()
            self.error = exc

    def join(self, timeout: float = 30) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"still running after {timeout}s"
        if self.error is not None:
            raise self.error


def run_until_idle(store: Any, timeout: float = 30) -> None:
    """``store.run_until_idle()``, failing the test instead of hanging it."""
    Background(store.run_until_idle).join(timeout)
