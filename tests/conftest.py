"""Fixtures every test uses: real stores in a temporary folder, a fake clock, child processes.

The contract, crash, limit and schedule tests (``tests/contract``, ``tests/crash``,
``tests/limits``, ``tests/schedules``) run once per backend: the ``backend`` fixture is
parametrised over every backend ``kits.KITS`` has (SQLite and PostgreSQL),
``kit`` is that backend's test kit (see ``kits.py``) and
``target`` what ``tinystore.open`` takes for the test's store. The other
folders are SQLite-only, and ``store_path`` is the store's file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Generator, Iterator

import pytest

import kits
import tinystore
from tinystore.testing import FakeClock

TESTS = Path(__file__).parent
BACKEND_NEUTRAL = ("contract", "crash", "limits", "schedules")  # the folders whose tests run on every backend
# The files and folders whose tests take longest, longest first. They start first, so that a run on several
# worker processes (``-n``, each taking the next test file as it is free) does not end with one file left.
LONGEST_FIRST = ("test_benchmarks_run.py", "soak", "powercut", "test_docs.py", "crash", "limits")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the tests of ``LONGEST_FIRST`` first, in its order; each file's tests keep their order."""
    def rank(item: pytest.Item) -> int:
        top = Path(item.path).relative_to(TESTS).parts[0]
        return LONGEST_FIRST.index(top) if top in LONGEST_FIRST else len(LONGEST_FIRST)
    items.sort(key=rank)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                               call: pytest.CallInfo) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A report's captured output and failure text with lone surrogates escaped (as ``backslashreplace``
    prints them): with ``-n`` each report goes to the main process as UTF-8, which cannot carry them, and
    some tests log such text on purpose (JOB-07's error text with a lone surrogate)."""
    report = yield
    report.sections = [(title, _utf8(text)) for title, text in report.sections]
    if report.longrepr is not None and _utf8(str(report.longrepr)) != str(report.longrepr):
        report.longrepr = _utf8(str(report.longrepr))
    return report


def _utf8(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The backend-neutral folders' tests run once per backend; the others on SQLite only."""
    if "backend" in metafunc.fixturenames:
        folder = Path(metafunc.definition.path).relative_to(TESTS).parts[0]
        metafunc.parametrize("backend", list(kits.KITS) if folder in BACKEND_NEUTRAL else ["sqlite"])


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test, by its kit's name (see ``pytest_generate_tests``)."""
    return request.param


@pytest.fixture
def kit(backend: str, tmp_path: Path) -> Iterator[kits.Kit]:
    """The test kit of the backend under test; what it made for the test is cleaned up at the end."""
    kit = kits.KITS[backend](tmp_path)
    yield kit
    kit.cleanup()


@pytest.fixture
def target(kit: kits.Kit) -> str:
    """Where the test's store lives, as ``tinystore.open`` takes it: a file path, a URL."""
    return kit.new_target()


@pytest.fixture
def store_path(kit: kits.Kit, target: str) -> str:
    """Where the store lives: a real file on disk (SQLite only; the backend-neutral tests use ``target``)."""
    if kit.name != "sqlite":
        pytest.skip("store_path is the store's SQLite file")
    return target


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_store(kit: kits.Kit, target: str) -> Iterator[Callable[..., tinystore.Store]]:
    """Open the test's store (as often as a test likes); every store opened is closed at the end.

    On PostgreSQL a process that died is found dead once it has not said it lives for a few seconds (it
    may be connecting again): each open waits until any that died can be (``kit.past_liveness_grace``),
    so that "the next open" of a test ends their leases as on SQLite. ``at_once=True`` opens without that
    wait, as a restart would: then a store opened within the grace ends those leases as it ends (DUR-03).
    Stores closed leave nothing to wait for."""
    opened: list[tinystore.Store] = []

    def _open(at_once: bool = False, **kwargs: Any) -> tinystore.Store:
        if not at_once:
            kit.past_liveness_grace(target)
        store = tinystore.open(target, **kwargs)
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
    """The environment of a child process: unbuffered, and able to import ``kits`` and ``helpers``."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env
