"""The Django tests run a real Django 6 project (``project/``: settings, a model, tasks) through its
``manage.py``, in child processes, on SQLite and on PostgreSQL.

Django 6 needs Python 3.12 or newer. The children run on this Python where
it has Django 6, else on the Python ``TINYSTORE_DJANGO_PYTHON`` names (CI
gives its 3.12 venv's), so the suite of any Python runs them. Without one
the tests are skipped saying so, except under ``CI=true``, where that fails
them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import kits

PROJECT = Path(__file__).parent / "project"


def django_python() -> str:
    """A Python that has Django 6: this one, or ``TINYSTORE_DJANGO_PYTHON``."""
    try:
        if int(metadata.version("django").split(".")[0]) >= 6:
            return sys.executable
    except metadata.PackageNotFoundError:
        pass
    python = os.environ.get("TINYSTORE_DJANGO_PYTHON")
    if python:
        return python
    message = (f"Django 6 is not installed for Python {sys.version.split()[0]} (it needs 3.12 or newer): "
               f"set TINYSTORE_DJANGO_PYTHON to a Python that has it")
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


class Shop:
    """The test project on one database: ``manage`` runs a command and returns the JSON it printed."""

    def __init__(self, python: str, target: str):
        self.python = python
        self.target = target
        self.env = {**os.environ, "SHOP_DATABASE": target}

    def manage(self, *args: str) -> Any:
        done = subprocess.run([self.python, "manage.py", *args], cwd=PROJECT, env=self.env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, f"manage.py {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
        return json.loads(done.stdout) if done.stdout.strip() else None

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([self.python, "manage.py", *args], cwd=PROJECT, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(params=["sqlite", "postgres"])
def shop(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shop]:
    """The project on a new SQLite file or PostgreSQL database, migrated."""
    python = django_python()
    kit = kits.KITS[request.param](tmp_path)
    try:
        shop = Shop(python, kit.new_target("django"))
        shop.manage("migrate", "--verbosity", "0")
        yield shop
    finally:
        kit.cleanup()


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    """Poll ``condition`` until it returns something true, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g}s")
        time.sleep(0.05)
