"""The manual: README and every page under ``docs/``.

Every ```python block runs as it is, in a fresh folder, in a new process, saved as a file (under the
name its first line gives, ``# test_reminders.py: ...``, else ``example.py``). Each runs twice in the
same folder, as a reader trying it again would: the second run finds the first run's store and tables,
and must still work. A block that reads ``DATABASE_URL`` gets a PostgreSQL database of its own (from
the PostgreSQL test kit), dropped afterwards, and one that reads ``DIRECT_URL`` a PgBouncer in front of
it besides (``DATABASE_URL`` is then the pooler's); a block that imports Django runs on a Python that
has Django 6 (``helpers.django_python``). A ```py block is an excerpt, and is not run.

No two blocks open the same store file, so that a reader may run them one after another in one
folder; the tutorial's steps share ``shop.db`` on purpose, and run in order in one folder here too.
The site builds with warnings as errors, and its pages draw in headless Chromium.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

import kits
from helpers import django_python

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TUTORIAL = ROOT / "docs" / "tutorial.md"
FENCE = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)
OPENED = re.compile(r"""tinystore\.open\(\s*(?:str\()?["']([^"':/]+)["']""")
NAMED = re.compile(r"#\s*(\w+\.py)\b")


def blocks_of(page: Path) -> list[str]:
    return FENCE.findall(page.read_text("utf-8"))


BLOCKS = [(page.relative_to(ROOT).as_posix(), number, code)
          for page in PAGES for number, code in enumerate(blocks_of(page), 1)]


def run_block(code: str, folder: Path, env: dict[str, str], where: str) -> None:
    """Run one block as a file of ``folder``, and fail with its output where it fails."""
    python = django_python() if "import django" in code else sys.executable
    first = code.splitlines()[0] if code else ""
    named = NAMED.match(first)
    path = folder / (named.group(1) if named else "example.py")
    path.write_text(code, "utf-8")
    done = subprocess.run([python, path.name], cwd=folder, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, f"{where} failed:\n{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


@pytest.fixture
def environment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment a block runs in: a database of its own (and a pooler) where it reads their URLs."""
    code = request.param
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)  # the block sees the installed tinystore, as a reader does
    postgres = kits.PostgresKit(tmp_path) if "DATABASE_URL" in code else None
    pooler = None
    try:
        if postgres is not None:
            env["DATABASE_URL"] = postgres.new_target("docs")
            if "DIRECT_URL" in code:
                from pgbouncer import BINARY, PgBouncer
                if not os.path.exists(BINARY):
                    reason = f"no pgbouncer at {BINARY} (set PGBOUNCER)"
                    if os.environ.get("CI") == "true":
                        pytest.fail(reason)
                    pytest.skip(reason)
                pooler = PgBouncer(env["DATABASE_URL"])
                env["DIRECT_URL"], env["DATABASE_URL"] = env["DATABASE_URL"], pooler.url
        yield env
    finally:
        if pooler is not None:
            pooler.close()
        if postgres is not None:
            postgres.cleanup()


def test_the_manual_has_runnable_examples_on_every_page_that_teaches() -> None:
    pages = Counter(page for page, _, _ in BLOCKS)
    assert pages["README.md"] >= 1
    assert pages["docs/tutorial.md"] >= 3
    assert sum(pages.values()) >= 25


@pytest.mark.parametrize("environment", [code for _, _, code in BLOCKS], indirect=True,
                         ids=[f"{page}:{number}" for page, number, _ in BLOCKS])
def test_each_example_runs_and_runs_again_in_the_same_folder(environment: dict[str, str], tmp_path: Path,
                                                              request: pytest.FixtureRequest) -> None:
    page, number, code = BLOCKS[request.node.callspec.indices["environment"]]
    folder = tmp_path / "example"
    folder.mkdir()
    for run in ("first", "second"):
        run_block(code, folder, environment, f"{page} block {number}, on its {run} run")


def test_no_two_examples_open_the_same_store_file_but_the_tutorial_s_steps() -> None:
    opened: dict[str, set[str]] = {}
    for page, number, code in BLOCKS:
        for name in OPENED.findall(code):
            where = page if page == TUTORIAL.relative_to(ROOT).as_posix() else f"{page} block {number}"
            opened.setdefault(name, set()).add(where)
    shared = {name: sorted(places) for name, places in opened.items() if len(places) > 1}
    assert shared == {}, "examples that would meet in one folder (give each a store file of its own)"
    assert len(opened) >= 20


def test_the_tutorial_s_steps_run_in_order_in_one_folder(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for number, code in enumerate(blocks_of(TUTORIAL), 1):
        run_block(code, tmp_path, env, f"the tutorial's step block {number}, after the ones before it")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built with warnings as errors (``.ci/run`` builds it in an environment of the docs extra;
    here where MkDocs is installed)."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    folder = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert done.returncode == 0, done.stderr
    return folder


def test_the_site_builds_with_warnings_as_errors_and_renders_every_page_and_public_name(site: Path) -> None:
    pages = sorted(site.rglob("index.html"))
    assert len(pages) >= 40
    reference = "".join(p.read_text("utf-8") for p in (site / "reference").rglob("index.html"))
    import tinystore
    for name in tinystore.__all__:
        assert f'id="tinystore.{name}"' in reference, f"tinystore.{name} is on no page of the API reference"
    contracts = (site / "contracts" / "index.html").read_text("utf-8")
    assert "test_JOB_05_" in contracts and 'id="pau-01"' in contracts


def test_the_site_s_front_page_and_an_api_reference_page_draw_in_headless_chromium(site: Path,
                                                                                  tmp_path: Path) -> None:
    """With ``TINYSTORE_SCREENSHOTS=docs`` the screenshots go to ``docs/screenshots/`` (the committed ones
    are taken so), else to a folder of the test run."""
    chromium, chromedriver = "/usr/bin/chromium", "/usr/bin/chromedriver"
    if not (os.path.exists(chromium) and os.path.exists(chromedriver)):
        pytest.skip(f"no {chromium} and {chromedriver}: apt-get install chromium chromium-driver")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.common.by import By
    shots = ROOT / "docs" / "screenshots" if os.environ.get("TINYSTORE_SCREENSHOTS") == "docs" else tmp_path
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietFiles, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,900", "--hide-scrollbars", "--lang=en-US"):
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=chromedriver))
    try:
        base = f"http://127.0.0.1:{server.server_port}/"
        browser.get(base)
        assert "tinystore" in browser.title
        assert "A durable job queue" in browser.find_element(By.TAG_NAME, "article").text
        browser.save_screenshot(str(shots / "site-front-page.png"))
        browser.get(base + "reference/queue/")
        heading = browser.find_element(By.ID, "tinystore.Queue.add")
        assert "add" in heading.text
        browser.execute_script("arguments[0].scrollIntoView()", browser.find_element(By.ID, "tinystore.Queue"))
        browser.save_screenshot(str(shots / "site-reference-queue.png"))
    finally:
        browser.quit()
        server.shutdown()


class QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_every_link_of_readme_into_the_repository_reaches_a_file_and_readme_stays_a_landing_page() -> None:
    text = (ROOT / "README.md").read_text("utf-8")
    links = [target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", text)
             if not target.startswith(("http://", "https://", "#"))]
    assert links, "README links into the manual"
    assert [link for link in links if not (ROOT / link).exists()] == []
    assert len(text.splitlines()) <= 300


def test_the_contracts_page_names_only_contracts_that_tests_are_named_after_and_lists_every_other() -> None:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    found = hooks.tests_by_contract()
    page = (ROOT / "docs" / "contracts.md").read_text("utf-8")
    rendered = hooks.contracts_page(page, found)  # raises where the page names a contract no test checks
    assert "<!-- tests:" not in rendered
    assert all(name in rendered for tests in found.values() for _, name in tests)
    with pytest.raises(ValueError, match="JOB-99"):
        hooks.contracts_page("<!-- tests: JOB-99 -->", found)
