"""Helpers for tests that run real child processes: start one, hear where it is, kill it."""

from __future__ import annotations

import selectors
import subprocess
import sys
import textwrap
import time
from typing import Any


def run_child(code: str, *args: str, timeout: float = 60, check: bool = False, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run ``code`` in a new Python process (a real process, to kill or to let die) and wait for it."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True,
                          text=True, timeout=timeout, check=check, **kwargs)


def start_child(code: str, *args: str, **kwargs: Any) -> subprocess.Popen:
    """Start ``code`` in a new Python process without waiting for it."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def wait_for_line(proc: subprocess.Popen, expected: str, timeout: float = 30) -> str:
    """Read the child's stdout until a line starts with ``expected``: the child says where it is."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
            break
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(expected):
            return line.strip()
    stderr = proc.stderr.read() if proc.poll() is not None else ""
    raise AssertionError(f"the child never printed {expected!r}; exit {proc.poll()}; stderr:\n{stderr}")
