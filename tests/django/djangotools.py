"""The test project (``project/``: settings, a model, tasks) driven through its ``manage.py``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

PROJECT = Path(__file__).parent / "project"


class Shop:
    """The test project on one database: ``manage`` runs a command and returns the JSON it printed."""

    def __init__(self, python: str, target: str):
        self.python = python
        self.target = target
        self.env = {**os.environ, "SHOP_DATABASE": target}

    def manage(self, *args: str) -> Any:
        done = self._run(args)
        assert done.returncode == 0, f"manage.py {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
        return json.loads(done.stdout) if done.stdout.strip() else None

    def refused(self, *args: str) -> str:
        """The last line a command that must fail wrote to stderr."""
        done = self._run(args)
        assert done.returncode != 0, f"manage.py {' '.join(args)} exited 0:\n{done.stdout}"
        return done.stderr.strip().splitlines()[-1]

    def _run(self, args: tuple[str, ...]) -> subprocess.CompletedProcess:
        return subprocess.run([self.python, "manage.py", *args], cwd=PROJECT, env=self.env, capture_output=True,
                              text=True, timeout=120)

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([self.python, "manage.py", *args], cwd=PROJECT, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


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
