"""The test project's own tests (``project/shop/tests.py``), run by Django's test runner, ``manage.py
test``, as a Django project runs its tests: on SQLite and on PostgreSQL, with USE_TZ = True and (the
naive-time tests) False. The runner makes its test database and must be able to destroy it at the end.

The Django that runs them is the one of ``helpers.django_python``: set
TINYSTORE_DJANGO_PYTHON to a Python with another Django 6 to run them on it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

import kits
from djangotools import PROJECT
from helpers import django_python


@pytest.fixture(params=["sqlite", "postgres"])
def databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[kits.Kit, str, str]]:
    """A kit, the project's database and the name of its test database, which does not exist yet."""
    kit = kits.KITS[request.param](tmp_path)
    try:
        target = kit.new_target("django")
        if isinstance(kit, kits.PostgresKit):
            # made here so that the kit drops it at the end, if the runner could not; the runner finds it
            # there and, told --noinput, makes it anew
            yield kit, target, kit.new_target("djangotest").rsplit("/", 1)[1]
        else:
            yield kit, target, str(tmp_path / "test.db")
    finally:
        kit.cleanup()


def test_djangos_test_runner_runs_the_projects_tests_and_destroys_its_test_database(databases) -> None:
    kit, target, test_database = databases
    for use_tz, labels in (("1", ["shop"]), ("0", ["shop.tests.NaiveTimes"])):
        done = subprocess.run([django_python(), "manage.py", "test", *labels, "--noinput"], cwd=PROJECT,
                              env={**os.environ, "SHOP_DATABASE": target, "SHOP_TEST_DATABASE": test_database,
                                   "SHOP_USE_TZ": use_tz}, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"USE_TZ={use_tz}:\n{done.stderr}"
        assert done.stderr.rstrip().endswith("Destroying test database for alias 'default'..."), done.stderr
        assert "\nOK" in done.stderr, done.stderr
        assert not exists(kit, target, test_database), f"the test database {test_database} is still there"


def exists(kit: kits.Kit, target: str, test_database: str) -> bool:
    if isinstance(kit, kits.PostgresKit):
        return bool(kit.app_rows(target, "SELECT 1 FROM pg_database WHERE datname = %s", (test_database,)))
    return any(Path(test_database + suffix).exists() for suffix in ("", "-wal", "-shm"))
