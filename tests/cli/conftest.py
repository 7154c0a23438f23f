"""Fixtures of the command's tests: see clitools.py."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from clitools import App


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    app = App(tmp_path)
    yield app
    app.close()
