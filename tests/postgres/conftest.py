"""Fixtures of the PostgreSQL backend's own tests: the local server, a fresh schema per test.

The server's URL comes from ``TINYSTORE_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``). When it cannot be reached the
tests are skipped, saying why; under ``CI=true`` they fail instead, so that a
CI run without its server is not green by accident.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

psycopg = pytest.importorskip("psycopg")

import tinystore  # noqa: E402

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
HERE = Path(__file__).parent


def _server_url() -> str:
    return os.environ.get("TINYSTORE_TEST_POSTGRES", DEFAULT_URL)


@pytest.fixture(scope="session")
def pg_url() -> str:
    url = _server_url()
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        shown = re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)  # never a password in a report
        reason = f"the PostgreSQL server of TINYSTORE_TEST_POSTGRES ({shown}) cannot be reached: {exc}".strip()
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return url


class PG:
    """One test's schema on the server: open stores in it, read its tables, run children on it."""

    def __init__(self, url: str, schema: str):
        self.url = url
        self.schema = schema
        self.stores: list[tinystore.Store] = []

    def open(self, **kwargs: Any) -> tinystore.Store:
        store = tinystore.open(self.url, schema=self.schema, **kwargs)
        self.stores.append(store)
        return store

    def connect(self, **kwargs: Any) -> "psycopg.Connection":
        return psycopg.connect(self.url, **kwargs)

    def rows(self, sql: str, params: Any = None) -> list[tuple]:
        """Rows read on a connection of its own; ``{s}`` in ``sql`` is the schema."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(sql.replace("{s}", f'"{self.schema}"'), params)
            return cur.fetchall() if cur.description is not None else []

    def child(self, *args: str) -> list[str]:
        """The command line of a child process running ``child.py`` on this schema."""
        return [sys.executable, str(HERE / "child.py"), self.url, self.schema, *args]


@pytest.fixture
def pg(pg_url: str) -> Iterator[PG]:
    schema = f"ts_{secrets.token_hex(6)}"
    kit = PG(pg_url, schema)
    yield kit
    for store in reversed(kit.stores):
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '20s'")
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    import time

    def _wait(predicate: Callable[[], Any], timeout: float = 10.0, every: float = 0.02) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout}s: {predicate}")
            time.sleep(every)
    return _wait


@pytest.fixture
def pgbouncer(pg_url: str) -> Iterator[Any]:
    """A PgBouncer in transaction pooling mode in front of the test server (``tests/pgbouncer.py``); ``.url``."""
    from pgbouncer import BINARY, PgBouncer

    if not os.path.exists(BINARY):
        reason = f"no pgbouncer at {BINARY} (set PGBOUNCER)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    pooler = PgBouncer(pg_url)
    yield pooler
    pooler.close()
