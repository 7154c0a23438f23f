"""Fresh virtual environments with a built wheel of tinystore installed, for the tests that run tinystore
as its users get it (``test_package.py``, ``test_releases.py``).

A venv is made once per wheel (its SHA-256) and extras, and kept under ``$TINYSTORE_TEST_VENVS``
(``/tmp/tinystore-test-venvs`` unless set): the next run with the same wheel finds it ready. It is built
under a temporary name and renamed when complete, under a file lock, so that test processes started
together make it once and never use a half-made one.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(os.environ.get("TINYSTORE_TEST_VENVS", "/tmp/tinystore-test-venvs"))
# A wheel built with a fixed date is the same bytes each time from the same source: its venv is found again.
REPRODUCIBLE = {"SOURCE_DATE_EPOCH": "315532800"}


def build(source: Path, outdir: Path) -> tuple[Path, Path]:
    """The wheel and the sdist of the project at ``source``, built into ``outdir`` (the wheel from the sdist,
    as ``python -m build`` does)."""
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(outdir), str(source)], check=True,
                   capture_output=True, env={**os.environ, **REPRODUCIBLE})
    (wheel,) = outdir.glob("tinystore-*.whl")
    (sdist,) = outdir.glob("tinystore-*.tar.gz")
    return wheel, sdist


def python_with(wheel: Path, extras: str = "") -> Path:
    """The python of a venv where ``wheel`` (with ``extras``, e.g. ``"postgres,web"``) is installed."""
    digest = hashlib.sha256(wheel.read_bytes() + extras.encode()).hexdigest()[:16]
    where = ROOT / f"{wheel.name.split('-')[1]}-{digest}"
    python = where / "bin" / "python"
    if python.exists():
        return python
    ROOT.mkdir(parents=True, exist_ok=True)
    with open(ROOT / f"{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not python.exists():
            making = ROOT / f"{digest}.making"
            shutil.rmtree(making, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(making)], check=True)
            requirement = f"{wheel}[{extras}]" if extras else str(wheel)
            subprocess.run([str(making / "bin" / "pip"), "install", "--quiet", "--no-compile", requirement],
                           check=True, capture_output=True)
            making.rename(where)  # a venv's scripts name its folder: they are not used, only bin/python -I
    return python
