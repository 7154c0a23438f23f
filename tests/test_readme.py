"""README's examples run as they are: each ```python block, in a fresh folder, in a new process.

Each block runs twice in the same folder, as a reader trying it again would:
the second run finds the first run's store and tables, and must still work.
A block that reads ``DATABASE_URL`` gets a PostgreSQL database of its own
(from the PostgreSQL test kit), dropped afterwards; a block that imports
Django runs on a Python that has Django 6 (``helpers.django_python``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kits
from helpers import django_python

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.S)


def test_readme_has_runnable_examples() -> None:
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_each_readme_example_runs_and_runs_again_in_the_same_folder(number: int, tmp_path: Path) -> None:
    code = BLOCKS[number]
    env = dict(os.environ)
    python = django_python() if "import django" in code else sys.executable
    postgres = kits.PostgresKit(tmp_path) if "DATABASE_URL" in code else None
    try:
        if postgres is not None:
            env["DATABASE_URL"] = postgres.new_target("readme")
        for run in ("first", "second"):
            done = subprocess.run([python, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                                  timeout=120, env=env)
            assert done.returncode == 0, f"README block {number} failed on its {run} run:\n{code}\n{done.stderr}"
    finally:
        if postgres is not None:
            postgres.cleanup()
