"""What the dashboard's tests share: the real command in a child process, and where things are.

``Dashboard`` starts ``tinystore dashboard STORE --port 0`` and reads the
address it prints once it listens.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
DOCS = Path(__file__).resolve().parents[2] / "docs"
TOKEN = "test-token-1234"
WAIT = 20  # seconds: bounds a broken test; a passing one never waits for it


class Dashboard:
    """``tinystore dashboard`` serving a store file, in a child process, until ``stop``."""

    def __init__(self, target: str, *args: str, env: dict[str, str] | None = None):
        command = [sys.executable, "-m", "tinystore.cli", "dashboard", target, "--port", "0", *args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env=env or dict(os.environ, PYTHONUNBUFFERED="1"))
        assert self.process.stdout is not None
        self.first_line = self.process.stdout.readline()  # printed once it listens; "" if it ended
        found = re.search(r"(http://\S+/)", self.first_line)
        if found is None:
            raise AssertionError(f"the dashboard printed no address: {self.first_line!r} "
                                 f"{self.stop()[1]!r}")
        self.url = found.group(1)

    def stop(self) -> tuple[str, str]:
        """Stop it as SIGTERM does; what it printed after its first line, and on stderr."""
        self.process.terminate()
        out, err = self.process.communicate(timeout=WAIT)
        return out, err
