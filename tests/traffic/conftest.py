"""Fixtures of the traffic tests: see traffic_tools.py."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from traffic_tools import Lab


@pytest.fixture
def lab(tmp_path: Path, child_env: dict[str, str]) -> Iterator[Lab]:
    lab = Lab(tmp_path, child_env)
    yield lab
    lab.close()
