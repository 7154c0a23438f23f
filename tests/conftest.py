"""Fixtures every test uses: real store files in a temporary folder, a fake clock, child processes.

Contract tests take the backend from the ``backend`` fixture, so that every
backend runs the same suite; SQLite is the one this version has.
"""

from __future__ import annotations

import os
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


@pytest.fixture
def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env
