"""The dashboard in headless Chromium, served by the real command from a store file that real workers run.

The workers serve in this process (``store.start()``), the dashboard in a
child process, each with the file open: what the page shows, it read from
the file, and what it did, the workers see. The screenshots in ``docs/``
are taken here: ``TINYSTORE_SCREENSHOTS=docs pytest tests/web/test_browser.py``,
of a shop's store at ``shop/shop.db`` in the system's temporary folder (it
must not exist yet, and is removed after), so that the page's header shows
a path that means something to a reader, not the folder of a test run. Its
failed job's traceback shows where tinystore and this file are: take them
from a checkout at a path that means something too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
from webtools import DOCS, TOKEN, WAIT, Dashboard

import tinystore

pytest.importorskip("selenium")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

STATES = ("scheduled", "waiting", "running", "done", "failed")
SCRIPT = '<script>window.owned = 1</script><img src=x onerror="window.owned = 2">'


class Site:
    """A shop's store, ``shop.db`` in ``folder``, with two queues and their workers, and the dashboard of it."""

    def __init__(self, folder: Path):
        self.path = str(folder / "shop.db")
        self.store = tinystore.open(self.path, durability="off")
        self.mail = self.store.queue("mail", attempts=1, dedupe="1h")
        self.reports = self.store.queue("reports", concurrency=2, group_concurrency=1, rate="100/m", dedupe="1h")
        self.gate = threading.Event()
        self.mended = threading.Event()  # once set, a job asked to fail succeeds

        @self.mail.work
        def send(payload: Any, run: tinystore.Run) -> Any:
            if payload.get("gated"):
                self.gate.wait(WAIT)
            if payload.get("fail") and not self.mended.is_set():
                raise ValueError(f"no mailbox for {payload['to']}")
            return {"sent_to": payload.get("to")}

        self.reporting = threading.Semaphore(0)  # released by each slow report as it starts

        @self.reports.work
        def report(payload: Any, run: tinystore.Run) -> None:
            run.step("totals", lambda: {"rows": 3})
            if payload.get("slow"):
                self.reporting.release()
                self.gate.wait(WAIT)

        self.failed = self.mail.add({"to": "ann@example.org", "fail": True}, id="mail:ann").id
        self.scripted = self.mail.add({"to": "bob", "note": SCRIPT}, id="mail:script", delay="1h").id
        for i in range(6):
            self.reports.add({"day": i}, group=f"team:{i % 2}")
        self.mail.add({"to": "later"}, delay="2h")
        self.store.schedule("digest", every="1h")
        self.store.run_until_idle()
        self.store.start()
        for team in (0, 1):  # two reports run, one per group: the limits are in use in the screenshot
            self.reports.add({"slow": True}, group=f"team:{team}")
        for _ in range(2):
            assert self.reporting.acquire(timeout=WAIT)
        self.dashboard = Dashboard(self.path, "--token", TOKEN)

    def close(self) -> None:
        self.gate.set()
        self.dashboard.stop()
        self.store.close()


FOR_DOCS = os.environ.get("TINYSTORE_SCREENSHOTS") == "docs"


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: ``docs/`` with ``TINYSTORE_SCREENSHOTS=docs`` (the manual's are taken so),
    else a folder of the test run, so that running the tests leaves the checkout as it was."""
    return DOCS if FOR_DOCS else tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The shop's site, its store at ``shop/shop.db``: for the screenshots in ``docs/`` in the system's
    temporary folder (made now, refused if it exists, removed after); else in a folder of the test run."""
    folder = (Path(tempfile.gettempdir()) if FOR_DOCS else tmp_path_factory.mktemp("site")) / "shop"
    folder.mkdir()  # FileExistsError: a folder of that name is someone's, and it is never written over
    try:
        site = Site(folder)
        yield site
        site.close()
    finally:
        if FOR_DOCS:
            shutil.rmtree(folder)


def wait(browser: Any) -> WebDriverWait:
    return WebDriverWait(browser, WAIT)


def click_when_clickable(browser: Any, css: str) -> None:
    """Clicks the element once it can be clicked. The page redraws its cards as the store changes, so an
    element found may be replaced before the click lands: then it is found again."""
    def clicked(b: Any) -> bool:
        element = EC.element_to_be_clickable((By.CSS_SELECTOR, css))(b)
        if not element:
            return False
        element.click()
        return True
    WebDriverWait(browser, WAIT, ignored_exceptions=[StaleElementReferenceException]).until(clicked)


def text_of(browser: Any, css: str) -> str:
    """The text of an element, read again where the page redrew it meanwhile (a live update)."""
    def read(b: Any) -> Any:
        try:
            return b.find_element(By.CSS_SELECTOR, css).text
        except StaleElementReferenceException:
            return False
    return wait(browser).until(read)


def shown_counts(browser: Any, queue: str) -> dict[str, int]:
    """The counts a queue's card shows, by state."""
    links = browser.find_elements(By.CSS_SELECTOR, f'section[data-queue="{queue}"] .counts a')
    return {a.text.split()[0]: int(a.text.split()[1]) for a in links}


def open_page(browser: Any, site: Site, hash: str) -> None:
    browser.get(site.dashboard.url + hash)
    wait(browser).until(lambda b: b.find_element(By.ID, "live").text == "live")


def test_the_queues_page_shows_the_counts_that_stats_gives(browser: Any, site: Site, shots: Path) -> None:
    browser.set_window_size(1280, 1000)
    open_page(browser, site, "#token=" + TOKEN)
    stats = site.store.stats()
    for queue in ("mail", "reports"):
        want = {state: stats[queue][state] for state in STATES}
        wait(browser).until(lambda b: shown_counts(b, queue) == want)
    for state in STATES:  # the diagram: each state with the count of every queue
        node = browser.find_element(By.CSS_SELECTOR, f'#diagram g[data-state="{state}"]')
        assert node.text.split()[1] == str(sum(s[state] for s in stats.values()))
    assert "every 1h, next" in text_of(browser, 'section[data-queue="digest"]')
    card = text_of(browser, 'section[data-queue="reports"]')
    assert "2 of 2" in card and "of 100/m" in card and "at most 1" in card and "team:0: 1 of 1, team:1: 1 of 1" in card
    browser.save_screenshot(str(shots / "dashboard-queues.png"))


def test_the_header_names_the_store_the_page_shows_a_shops_store_for_the_screenshots(
        browser: Any, site: Site) -> None:
    open_page(browser, site, "#/")
    wait(browser).until(lambda b: text_of(b, "#store") == site.path)
    assert site.path.endswith(os.path.join("shop", "shop.db"))


def test_a_failed_jobs_page_shows_its_error_with_the_traceback(browser: Any, site: Site, shots: Path) -> None:
    open_page(browser, site, f"#/job?queue=mail&id={site.failed}")
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "job-state"), "failed"))
    error = text_of(browser, "#error")
    assert "ValueError: no mailbox for ann@example.org" in error
    assert "Traceback (most recent call last)" in error and "in send" in error
    assert '"to": "ann@example.org"' in text_of(browser, "#payload")
    attempts = text_of(browser, "#attempts")
    assert "ValueError: no mailbox for ann@example.org" in attempts and "attempt" in attempts
    browser.save_screenshot(str(shots / "dashboard-job.png"))


def test_retry_from_the_page_runs_the_job_and_the_page_follows_it(browser: Any, site: Site) -> None:
    site.mended.set()  # the mailbox exists now: the job's next run succeeds
    open_page(browser, site, f"#/job?queue=mail&id={site.failed}")
    wait(browser).until(EC.element_to_be_clickable((By.ID, "retry"))).click()
    wait(browser).until(EC.alert_is_present()).accept()  # it asks first
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "status"), "waits to run again"))
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "job-state"), "done"))
    assert site.mail.get(site.failed).state == "done"
    assert '"sent_to": "ann@example.org"' in text_of(browser, "#result")


def test_pause_and_resume_from_the_queues_page_ask_first_and_the_card_shows_the_pause(browser: Any,
                                                                                     site: Site) -> None:
    digest = site.store.queue("digest")
    open_page(browser, site, "#token=" + TOKEN)  # the address the command prints: the page knows the token
    card = 'section[data-queue="digest"]'
    click_when_clickable(browser, f"{card} button.pause")
    wait(browser).until(EC.alert_is_present()).accept()  # it asks first
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "status"), "digest is paused"))
    wait(browser).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, f"{card} h3"), "paused"))
    assert digest.paused is True
    click_when_clickable(browser, f"{card} button.resume")
    wait(browser).until(EC.alert_is_present()).accept()
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "status"), "digest is resumed"))
    wait(browser).until(lambda b: not b.find_elements(By.CSS_SELECTOR, f"{card} .badge-paused"))
    assert digest.paused is False


def test_the_job_page_changes_without_a_reload_when_the_job_finishes(browser: Any, site: Site) -> None:
    gated = site.mail.add({"to": "carol", "gated": True}).id
    wait(browser).until(lambda b: site.mail.get(gated).state == "running")
    open_page(browser, site, f"#/job?queue=mail&id={gated}")
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "job-state"), "running"))
    browser.execute_script("window.notReloaded = true")
    site.gate.set()
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "job-state"), "done"))
    assert browser.execute_script("return window.notReloaded") is True
    assert site.mail.get(gated).state == "done"


def test_a_post_without_the_token_changes_nothing(browser: Any, site: Site) -> None:
    open_page(browser, site, "#/")
    post = """const [path, token, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
              const headers = {"Content-Type": "application/json"};
              if (token) headers["X-Tinystore-Token"] = token;
              fetch(path, {method: "POST", headers, body: JSON.stringify({queue: "mail", id: "mail:script"})})
                .then((r) => done(r.status));"""
    assert browser.execute_async_script(post, "api/cancel", None) == 403
    assert browser.execute_async_script(post, "api/cancel", "wrong-token") == 403
    assert site.mail.get(site.scripted).state == "scheduled"


def test_a_payload_holding_a_script_is_shown_as_text(browser: Any, site: Site) -> None:
    open_page(browser, site, f"#/job?queue=mail&id={site.scripted}")
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "payload"), "<script>"))
    assert SCRIPT.replace('"', '\\"') in text_of(browser, "#payload")
    assert browser.execute_script("return window.owned") is None
    assert browser.find_elements(By.CSS_SELECTOR, "main img, main script") == []


@pytest.mark.parametrize("page", ["#/", "#/job?queue=mail&id=mail:ann", "#/jobs?queue=mail"])
def test_at_a_phones_width_nothing_is_wider_than_the_screen(browser: Any, site: Site, page: str,
                                                           shots: Path) -> None:
    browser.set_window_size(390, 844)
    browser.get_log("browser")  # what earlier tests logged (a refused POST) is not this page's
    try:
        open_page(browser, site, page)
        wait(browser).until(lambda b: "Loading" not in text_of(b, "main"))
        wide = browser.execute_script("""return [...document.querySelectorAll("body *")]
            .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
            .map((e) => e.tagName + "." + e.className).slice(0, 5)""")
        assert wide == []
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        assert [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        if page == "#/":
            browser.save_screenshot(str(shots / "dashboard-phone.png"))
    finally:
        browser.set_window_size(1280, 1000)


def test_cancel_every_job_a_filtered_page_lists_from_the_page(browser: Any, site: Site) -> None:
    ids = [site.mail.add({"to": f"bulk-{n}"}, id=f"bulk:{n}", group="bulk", delay="1h").id for n in range(3)]
    open_page(browser, site, "#token=" + TOKEN)
    open_page(browser, site, "#/jobs?queue=mail&state=scheduled&group=bulk")
    wait(browser).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#list tbody tr")) == 3)
    wait(browser).until(EC.element_to_be_clickable((By.ID, "cancel-many"))).click()
    alert = wait(browser).until(EC.alert_is_present())
    assert alert.text == "Cancel the scheduled jobs of mail in group bulk, on every page?"
    alert.accept()  # it asks first
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "status"), "3 jobs of mail cancelled"))
    assert [site.mail.get(id) for id in ids] == [None, None, None]
    assert site.mail.get(site.scripted).state == "scheduled"  # not of the group: left as it was
