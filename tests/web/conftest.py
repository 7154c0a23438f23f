"""Fixtures of the dashboard's tests: headless Chromium (helpers in ``webtools``).

The browser is Debian's chromium driven by its chromedriver through
Selenium, one per test module. Where chromium is not installed the browser
tests are skipped saying so, except under ``CI=true``, where that fails
them: CI installs it (``.ci/run``).
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

pytest.importorskip("starlette", reason='the dashboard needs tinystore[web]')

from webtools import CHROMEDRIVER, CHROMIUM  # noqa: E402


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
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the page's console, for its errors
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()
