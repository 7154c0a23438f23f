"""Fixtures every test uses: real store files in a temporary folder, a fake clock, child processes.

Contract tests take the backend from the ``backend`` fixture, so that every
backend runs the same suite; SQLite is the one this version has.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import tinystore
from tinystore.testing import FakeClock


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store_path(tmp_path: Path, backend: str) -> str:
    """Where the store lives: a real file on disk."""
    return str(tmp_path / "store.db")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_store(store_path: str) -> Iterator[Callable[..., tinystore.Store]]:
    """Open the test's store (as often as a test likes); every store opened is closed at the end."""
    opened: list[tinystore.Store] = []

    def _open(**kwargs: Any) -> tinystore.Store:
        store = tinystore.open(store_path, **kwargs)
        opened.append(store)
        return store

    yield _open
    for store in reversed(opened):
        store.close()


@pytest.fixture
def store(open_store: Callable[..., tinystore.Store], clock: FakeClock) -> tinystore.Store:
    """A store on a fake clock: tests move time instead of sleeping."""
    return open_store(clock=clock)


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
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    import time
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


@pytest.fixture
def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env
