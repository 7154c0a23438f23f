"""tinystore as its users get it (SPEC §17): the wheel built from this repository, installed into a fresh
virtual environment, opens a store and serves it from a folder outside the source tree, on SQLite and on
PostgreSQL; the sdist holds the same files; a file missing from an installation is named as such. Under CI
the suite itself runs against the installed wheel (.ci/run), which the last test checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

import kits
import tinystore
import venvs

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "tinystore"

# Run by the installed tinystore, in a folder of the test's own: adds jobs, serves them until none is left,
# builds the dashboard (which reads its page from the package), and says where tinystore was imported from.
SERVE = textwrap.dedent("""
    import json, sys
    import tinystore, tinystore.web
    store = tinystore.open(sys.argv[1])
    greetings = store.queue("greetings")
    done = []
    greetings.work(lambda payload, run: done.append(payload["n"]))
    for n in range(5):
        greetings.add({"n": n}, id=f"greeting:{n}")
    store.run_until_idle()
    tinystore.web.app(store, token="t")
    jobs = [greetings.get(f"greeting:{n}") for n in range(5)]
    states = sorted({job.state if job else "done, not kept" for job in jobs})
    store.close()
    print(json.dumps({"file": tinystore.__file__, "done": sorted(done), "states": states}))
""")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return venvs.build(ROOT, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def installed(built: tuple[Path, Path]) -> Path:
    return venvs.python_with(built[0], "postgres,web")


def package_files() -> set[str]:
    """Every file of the source tree's package, as a path from ``tinystore/`` (byte code left out)."""
    return {str(path.relative_to(PACKAGE.parent)) for path in PACKAGE.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


def serve(python: Path, target: str, folder: Path) -> dict:
    import json
    script = folder / "serve.py"
    script.write_text(SERVE)
    # -I: neither the source tree, nor PYTHONPATH, nor the user's site-packages is on the path.
    done = subprocess.run([str(python), "-I", str(script), target], cwd=folder, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_wheel_holds_every_file_of_the_package(built: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(built[0]) as wheel:
        held = {name for name in wheel.namelist() if name.startswith("tinystore/")}
    assert package_files() - held == set()


def test_the_sdist_holds_the_same_files_of_the_package_as_the_wheel(built: tuple[Path, Path]) -> None:
    with tarfile.open(built[1]) as sdist:
        top = sdist.getnames()[0].split("/")[0]
        held = {name[len(f"{top}/src/"):] for name in sdist.getnames()
                if name.startswith(f"{top}/src/tinystore/") and sdist.getmember(name).isfile()}
    with zipfile.ZipFile(built[0]) as wheel:
        assert held == {name for name in wheel.namelist() if name.startswith("tinystore/")}


def test_the_installed_wheel_opens_a_sqlite_store_and_serves_it_outside_the_source_tree(
        installed: Path, tmp_path: Path) -> None:
    found = serve(installed, str(tmp_path / "app.db"), tmp_path)
    assert Path(found["file"]).is_relative_to(installed.parent.parent)
    assert "site-packages" in found["file"]
    assert found["done"] == [0, 1, 2, 3, 4]
    assert found["states"] == ["done, not kept"]  # a done job is kept for keep= (not at all, by default)


def test_the_installed_wheel_opens_a_postgres_store_and_serves_it(installed: Path, tmp_path: Path) -> None:
    kit = kits.PostgresKit(tmp_path)
    try:
        found = serve(installed, kit.new_target(), tmp_path)
    finally:
        kit.cleanup()
    assert "site-packages" in found["file"]
    assert found["done"] == [0, 1, 2, 3, 4]
    assert found["states"] == ["done, not kept"]  # a done job is kept for keep= (not at all, by default)


def opened_without(tmp_path: Path, missing: str) -> str:
    """What ``tinystore.open`` raised, run from a copy of the package without the file ``missing``."""
    copy = tmp_path / "site" / "tinystore"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / missing).unlink()
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import tinystore\n"
              "try: tinystore.open(sys.argv[2])\n"
              "except tinystore.Error as exc: print(type(exc).__name__, exc)")
    done = subprocess.run([sys.executable, "-I", "-c", script, str(copy.parent), str(tmp_path / "app.db")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_package_file_missing_from_an_installation_is_named_not_blamed_on_the_store(tmp_path: Path) -> None:
    said = opened_without(tmp_path, "backends/_engine/queries.sql")
    assert said == ("Error tinystore's installation is incomplete: its file tinystore/backends/_engine/queries.sql "
                    "is missing (reinstall tinystore; a wheel built without its package data lacks it)")
    assert not (tmp_path / "app.db").exists()


def test_a_migration_missing_from_an_installation_is_named(tmp_path: Path) -> None:
    said = opened_without(tmp_path, "backends/sqlite/migration_003.sql")
    assert "its file tinystore/backends/sqlite/migration_003.sql is missing" in said
    assert not (tmp_path / "app.db").exists()


@pytest.mark.skipif(os.environ.get("CI") != "true",
                    reason="CI runs the tests against the built wheel; a development venv installs src/ editable")
def test_under_ci_the_tests_import_the_installed_wheel_not_the_source_tree() -> None:
    imported = Path(tinystore.__file__).resolve()
    assert "site-packages" in imported.parts, imported
    assert not imported.is_relative_to(ROOT / "src"), imported
