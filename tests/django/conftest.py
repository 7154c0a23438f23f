"""The Django tests run a real Django 6 project through its ``manage.py``, in child processes, on SQLite
and on PostgreSQL. Django 6 needs Python 3.12 or newer: the children run on the Python
``helpers.django_python`` finds, so the suite of any Python runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

import kits
from djangotools import Shop
from helpers import django_python


@pytest.fixture(params=["sqlite", "postgres"])
def shop(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shop]:
    """The project on a new SQLite file or PostgreSQL database, migrated."""
    python = django_python()
    kit = kits.KITS[request.param](tmp_path)
    try:
        shop = Shop(python, kit.new_target("django"))
        shop.manage("migrate", "--verbosity", "0")
        yield shop
    finally:
        kit.cleanup()
