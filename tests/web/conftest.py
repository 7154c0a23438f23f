"""Fixtures of the dashboard's tests: the real command in a child process, headless Chromium, workers.

``Dashboard`` starts ``tinystore dashboard STORE --port 0 --token T`` and
reads the address it prints; the browser is Debian's chromium driven by its
chromedriver through Selenium, one per test module. Where chromium is not
installed the browser tests are skipped saying so, except under ``CI=true``,
where that fails them: CI installs it (``.ci/run``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("starlette", reason='the dashboard needs tinystore[web]')

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


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's tests."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        message = f"no {CHROMIUM} and {CHROMEDRIVER}: apt-get install chromium chromium-driver"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1000", "--hide-scrollbars", "--lang=en-US"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()
