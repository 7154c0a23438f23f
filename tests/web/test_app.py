"""The dashboard's app over HTTP, on each backend: what it shows is what the store keeps, its actions
need the token, what it is given is checked, and it mounts under a path in an application's own app."""

from __future__ import annotations

import json
import re
import socket
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

import kits
import tinystore
import tinystore.web
from tinystore.web._views import iso
from webtools import TOKEN, WAIT

STATES = ("scheduled", "waiting", "running", "done", "failed")
AUTH = {"X-Tinystore-Token": TOKEN}


def filled(kit: kits.Kit) -> tinystore.Store:
    """A store with a queue of jobs done, failed, waiting and scheduled, and an empty queue."""
    store = tinystore.open(kit.new_target("web"))
    work = store.queue("work", attempts=1, dedupe="1h", concurrency=3, group_concurrency=2, rate="50/m")

    @work.work
    def handle(payload: Any, run: tinystore.Run) -> Any:
        run.step("look", lambda: {"seen": payload["n"]})
        if payload.get("fail"):
            raise RuntimeError(f"job {payload['n']} broke")
        return {"doubled": payload["n"] * 2}

    for n in range(6):
        work.add({"n": n, "fail": n % 3 == 0}, id=f"job-{n}", group=f"g{n % 2}")
    store.run_until_idle()
    work.add({"n": 10}, id="later-10", delay="1h")
    store.queue("empty")
    return store


@pytest.fixture(params=list(kits.KITS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tinystore.Store]:
    """A filled store on each backend."""
    kit = kits.KITS[request.param](tmp_path)
    store = filled(kit)
    yield store
    store.close()
    kit.cleanup()


@pytest.fixture
def file_store(tmp_path: Path) -> Iterator[tinystore.Store]:
    """A filled store in a SQLite file, for what does not depend on the backend (checking input)."""
    store = filled(kits.SQLiteKit(tmp_path))
    yield store
    store.close()


class Served:
    """An app served by uvicorn on a free port in a thread of this process, until ``stop``."""

    def __init__(self, app: Any):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off",
                                                    timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]})
        self.thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT)


@pytest.fixture
def serve() -> Iterator[Callable[[Any], httpx.Client]]:
    """Serve an app; a client of it. Every server is stopped at the end."""
    served: list[Served] = []

    def _serve(app: Any) -> httpx.Client:
        served.append(Served(app))
        return httpx.Client(base_url=served[-1].url, timeout=WAIT)
    yield _serve
    for s in served:
        s.stop()


@pytest.fixture
def client(store: tinystore.Store, serve: Callable[[Any], httpx.Client]) -> httpx.Client:
    return serve(tinystore.web.app(store, token=TOKEN))


@pytest.fixture
def file_client(file_store: tinystore.Store, serve: Callable[[Any], httpx.Client]) -> httpx.Client:
    return serve(tinystore.web.app(file_store, token=TOKEN))


def test_the_queues_are_shown_with_the_counts_stats_gives(client: httpx.Client, store: tinystore.Store) -> None:
    data = client.get("/api/overview").json()
    stats = store.stats()
    assert [q["name"] for q in data["queues"]] == sorted(stats) == ["empty", "work"]
    assert sorted(client.get("/api/queues").json()["queues"]) == ["empty", "work"]
    work = next(q for q in data["queues"] if q["name"] == "work")
    assert work["counts"] == {state: stats["work"][state] for state in STATES}
    assert work["counts"] == {"scheduled": 1, "waiting": 0, "running": 0, "done": 4, "failed": 2}
    assert data["totals"] == work["counts"]
    assert data["hour"] == {"started": 6, "done": 4, "failed": 2}
    assert sum(work["hour"]["done"]) == 4 and sum(work["hour"]["failed"]) == 2 and len(work["hour"]["done"]) == 60
    assert work["limits"] == {"concurrency": 3, "running": 0, "rate": "50/m", "rate_used": 6, "group_concurrency": 2,
                              "group_rate": None, "busiest_groups": []}


def test_jobs_page_by_id_and_filter_by_state_group_and_id_prefix(client: httpx.Client) -> None:
    seen, after = [], ""
    while True:
        page = client.get("/api/jobs", params={"queue": "work", "limit": 2, "after": after}).json()
        seen += [j["id"] for j in page["jobs"]]
        if page["next"] is None:
            break
        after = page["next"]
    assert seen == sorted(seen) == [f"job-{n}" for n in range(6)] + ["later-10"]
    failed = client.get("/api/jobs", params={"queue": "work", "state": "failed"}).json()["jobs"]
    assert [(j["id"], j["error"]) for j in failed] == [("job-0", "RuntimeError: job 0 broke"),
                                                      ("job-3", "RuntimeError: job 3 broke")]
    group = client.get("/api/jobs", params={"queue": "work", "group": "g1", "state": "done"}).json()["jobs"]
    assert [j["id"] for j in group] == ["job-1", "job-5"]
    prefixed = client.get("/api/jobs", params={"queue": "work", "prefix": "later"}).json()["jobs"]
    assert [j["id"] for j in prefixed] == ["later-10"]
    exact = client.get("/api/jobs", params={"queue": "work", "prefix": "job-3", "state": "failed"}).json()["jobs"]
    assert [j["id"] for j in exact] == ["job-3"]


def test_a_jobs_page_shows_its_payload_error_steps_and_timeline(client: httpx.Client) -> None:
    job = client.get("/api/job", params={"queue": "work", "id": "job-3"}).json()
    assert (job["state"], job["attempt"], job["attempts"], job["group"]) == ("failed", 1, 1, "g1")
    assert job["payload"] == {"n": 3, "fail": True}
    assert job["error"].startswith("RuntimeError: job 3 broke\nTraceback (most recent call last):")
    assert job["steps"] == [{"name": "look", "attempt": 1, "answer": {"seen": 3}}]
    assert job["lease"] is None and [e["what"] for e in job["timeline"]][-1] == "failed after attempt 1"
    done = client.get("/api/job", params={"queue": "work", "id": "job-5"}).json()
    assert (done["state"], done["result"], done["error"]) == ("done", {"doubled": 10}, None)


def test_a_schedule_is_shown_with_its_rule_and_next_time(client: httpx.Client, store: tinystore.Store) -> None:
    store.schedule("nightly", every="15m", payload={"full": False})
    job = store.queue("nightly").get("nightly")
    queues = {q["name"]: q for q in client.get("/api/overview").json()["queues"]}
    assert queues["nightly"]["schedule"] == {"rule": "every 15m", "next": iso(job.at), "state": "scheduled"}
    assert queues["work"]["schedule"] is None
    page = client.get("/api/job", params={"queue": "nightly", "id": "nightly"}).json()
    assert page["repeat"] == "every 15m" and page["payload"] == {"full": False}


@pytest.mark.parametrize("path, params, status, message", [
    ("/api/jobs", {"queue": "work", "state": "lost"}, 400, "state='lost' must be one of"),
    ("/api/jobs", {"queue": "work", "limit": "many"}, 400, "limit='many' must be a whole number"),
    ("/api/jobs", {"queue": "work", "limit": "0"}, 400, "limit='0' must be a whole number"),
    ("/api/jobs", {}, 400, "name a queue"),
    ("/api/jobs", {"queue": "work", "group": "g" * 1025}, 400, "group must be 1 to 1024 bytes"),
    ("/api/jobs", {"queue": "nowhere"}, 404, "no queue named 'nowhere'"),
    ("/api/job", {"queue": "work", "id": "nobody"}, 404, "no job 'nobody'"),
    ("/api/job", {"queue": "work"}, 400, "name a job"),
    ("/api/events", {"view": "everything"}, 400, "view='everything' must be queues, jobs or job"),
    ("/api/events", {"view": "jobs", "queue": "work", "state": "lost"}, 400, "state='lost'"),
])
def test_bad_input_is_refused_saying_why(file_client: httpx.Client, path: str, params: dict, status: int,
                                         message: str) -> None:
    answer = file_client.get(path, params=params)
    assert answer.status_code == status
    assert message in answer.json()["error"]


def test_actions_without_the_token_change_nothing(client: httpx.Client, store: tinystore.Store) -> None:
    work = store.queue("work")
    for headers in ({}, {"X-Tinystore-Token": "guess"}, {"Cookie": f"token={TOKEN}"}):
        assert client.post("/api/retry", json={"queue": "work", "id": "job-0"}, headers=headers).status_code == 403
        assert client.post("/api/cancel", json={"queue": "work", "id": "later-10"}, headers=headers).status_code == 403
        assert client.post("/api/retry-failed", json={"queue": "work"}, headers=headers).status_code == 403
    assert work.get("job-0").state == "failed" and work.get("later-10").state == "scheduled"
    assert client.get("/api/retry").status_code == 405  # an action is never a GET


def test_actions_with_the_token_say_what_they_did(client: httpx.Client, store: tinystore.Store) -> None:
    work = store.queue("work")
    answer = client.post("/api/retry", json={"queue": "work", "id": "job-0"}, headers=AUTH).json()
    assert answer == {"done": True, "message": "job job-0 of work waits to run again, its attempts from zero"}
    assert work.get("job-0").state == "waiting"
    again = client.post("/api/retry", json={"queue": "work", "id": "job-0"}, headers=AUTH).json()
    assert again["done"] is False and "nothing was changed" in again["message"]
    assert client.post("/api/cancel", json={"queue": "work", "id": "later-10"}, headers=AUTH).json()["done"] is True
    assert work.get("later-10") is None
    assert client.post("/api/retry-failed", json={"queue": "work"}, headers=AUTH).json() == {
        "done": True, "message": "1 failed job of work waits to run again"}
    assert work.get("job-3").state == "waiting"


@pytest.mark.parametrize("body, message", [
    ("not json", "must be JSON"), ("[1]", "must be a JSON object"), ('{"queue": "work"}', "id must be a non-empty"),
    ('{"queue": 3, "id": "x"}', "queue must be a non-empty string, not 3"),
])
def test_an_action_with_a_bad_body_is_refused(file_client: httpx.Client, body: str, message: str) -> None:
    answer = file_client.post("/api/retry", content=body, headers=AUTH)
    assert answer.status_code == 400 and message in answer.json()["error"]


def test_app_refuses_a_missing_token(file_store: tinystore.Store) -> None:
    with pytest.raises(tinystore.InvalidArgument, match="needs a token"):
        tinystore.web.app(file_store, token="")


def test_mounted_under_a_path_the_page_finds_everything_relative_to_it(
        file_store: tinystore.Store, serve: Callable[[Any], httpx.Client]) -> None:
    client = serve(Starlette(routes=[Mount("/ops/jobs", tinystore.web.app(file_store, token=TOKEN))]))
    page = client.get("/ops/jobs/")
    assert page.status_code == 200 and '<base href="/ops/jobs/">' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for src in re.findall(r'(?:href|src)="([^"#]+)"', page.text):
        if src != "/ops/jobs/":
            assert not src.startswith("/"), src
            assert client.get("/ops/jobs/" + src).status_code == 200
    script = client.get("/ops/jobs/static/dashboard.js").text
    assert not re.search(r"""(fetch|EventSource)\(\s*["'`]/""", script)  # no URL from the site's root
    assert client.get("/ops/jobs/api/overview").json()["totals"]["failed"] == 2


def events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    event = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[len("event: "):]
        elif line.startswith("data: "):
            yield event, json.loads(line[len("data: "):])


def test_the_stream_tells_every_browser_when_a_job_ends_from_one_feed(
        store: tinystore.Store, serve: Callable[[Any], httpx.Client]) -> None:
    gate = threading.Event()
    slow = store.queue("slow", dedupe="1h")  # no limit: its end is told by no notice, and still seen

    @slow.work
    def wait_for_the_test(payload: Any, run: tinystore.Run) -> None:
        gate.wait(WAIT)

    slow.add({}, id="the-job")
    browser = serve(tinystore.web.app(store, token=TOKEN))
    store.start()
    try:
        params = {"view": "job", "queue": "slow", "id": "the-job"}
        with browser.stream("GET", "/api/events", params=params) as one, \
                browser.stream("GET", "/api/events", params=params) as two:
            first, second = events(one), events(two)
            for stream in (first, second):
                assert next(e for e in stream if e[0] == "overview")[1]["queues"]
                assert next(d for e, d in stream if e == "view" and d["state"] == "running")
            feeds = [t for t in threading.enumerate() if t.name == "tinystore-web-feed"]
            assert len(feeds) == 1
            gate.set()
            for stream in (first, second):
                done = next(d for e, d in stream if e == "view" and d["state"] == "done")
                assert done["id"] == "the-job" and done["lease"] is None
    finally:
        gate.set()
        store.stop()


def test_a_stream_ends_saying_why_when_the_store_closes(file_store: tinystore.Store,
                                                         serve: Callable[[Any], httpx.Client]) -> None:
    browser = serve(tinystore.web.app(file_store, token=TOKEN))
    with browser.stream("GET", "/api/events") as stream:
        told = events(stream)
        assert next(told)[0] == "overview"
        file_store.close()
        assert list(told) == [("trouble", {"error": f"the store {file_store.location!r} is closed"})]


def test_mounted_in_a_fastapi_app_it_serves_under_its_path(file_store: tinystore.Store,
                                                           serve: Callable[[Any], httpx.Client]) -> None:
    fastapi = pytest.importorskip("fastapi")
    application = fastapi.FastAPI()
    application.mount("/jobs", tinystore.web.app(file_store, token=TOKEN))
    client = serve(application)
    assert '<base href="/jobs/">' in client.get("/jobs/").text
    assert client.get("/jobs/api/overview").json()["totals"]["done"] == 4
    assert client.post("/jobs/api/cancel", json={"queue": "work", "id": "later-10"}).status_code == 403


def test_metrics_gives_the_stores_waiting_and_running_jobs_as_prometheus_text(
        client: httpx.Client, store: tinystore.Store) -> None:
    store.queue("work").add({"n": 20}, id="now-20")
    answer = client.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = answer.text.splitlines()
    assert 'tinystore_jobs_waiting{queue="work"} 1' in lines and 'tinystore_jobs_running{queue="work"} 0' in lines
    assert 'tinystore_jobs_waiting{queue="empty"} 0' in lines


def test_a_jobs_priority_is_shown_in_its_queues_page_and_on_its_own(client: httpx.Client,
                                                                    store: tinystore.Store) -> None:
    ranked = store.queue("ranked")
    ranked.add({}, id="plain")
    ranked.add({}, id="urgent", priority=20)
    page = client.get("/api/jobs", params={"queue": "ranked"}).json()["jobs"]
    assert [(j["id"], j["priority"]) for j in page] == [("plain", 0), ("urgent", 20)]
    assert client.get("/api/job", params={"queue": "ranked", "id": "urgent"}).json()["priority"] == 20


def test_pause_and_resume_need_the_token_and_the_queues_page_shows_the_pause(client: httpx.Client,
                                                                            store: tinystore.Store) -> None:
    work = store.queue("work")
    for headers in ({}, {"X-Tinystore-Token": "guess"}):
        assert client.post("/api/pause", json={"queue": "work"}, headers=headers).status_code == 403
    assert work.paused is False
    assert client.post("/api/pause", json={"queue": "work"}, headers=AUTH).json() == {
        "done": True, "message": "work is paused: no worker starts its jobs until it is resumed"}
    assert work.paused is True
    shown = {q["name"]: q["paused"] for q in client.get("/api/overview").json()["queues"]}
    assert shown == {"work": True, "empty": False}
    assert client.post("/api/pause", json={"queue": "work"}, headers=AUTH).json() == {
        "done": False, "message": "work was paused already: nothing was changed"}
    assert client.post("/api/resume", json={"queue": "work"}, headers=AUTH).json()["done"] is True
    assert work.paused is False
    assert client.post("/api/resume", json={"queue": "work"}, headers=AUTH).json() == {
        "done": False, "message": "work was not paused: nothing was changed"}
    assert client.get("/api/pause").status_code == 405
    unknown = client.post("/api/pause", json={"queue": "nope"}, headers=AUTH)
    assert unknown.status_code == 404 and "'nope'" in unknown.json()["error"]
    assert "nope" not in store.queues()


def test_cancel_many_and_retry_failed_act_on_every_job_the_filters_list_behind_the_token(
        client: httpx.Client, store: tinystore.Store) -> None:
    work = store.queue("work")
    work.add({"n": 11}, id="now-11", group="g1")
    work.add({"n": 12}, id="now-12", group="g0")
    for headers in ({}, {"X-Tinystore-Token": "guess"}):
        assert client.post("/api/cancel-many", json={"queue": "work"}, headers=headers).status_code == 403
    assert work.get("now-11").state == "waiting"

    answer = client.post("/api/cancel-many", json={"queue": "work", "state": "waiting", "group": "g1"}, headers=AUTH)
    assert answer.json() == {"done": True, "message": "1 job of work cancelled"}
    assert work.get("now-11") is None and work.get("now-12").state == "waiting"
    assert work.get("later-10").state == "scheduled"
    refused = client.post("/api/cancel-many", json={"queue": "work", "state": "failed"}, headers=AUTH)
    assert refused.status_code == 400
    assert "cancel_many acts on scheduled, waiting or running jobs" in refused.json()["error"]

    answer = client.post("/api/retry-failed", json={"queue": "work", "group": "g1"}, headers=AUTH)
    assert answer.json() == {"done": True, "message": "1 failed job of work waits to run again"}
    assert work.get("job-3").state == "waiting" and work.get("job-0").state == "failed"
    answer = client.post("/api/cancel-many", json={"queue": "work", "state": "", "group": ""}, headers=AUTH)
    assert answer.json() == {"done": True, "message": "3 jobs of work cancelled"}  # now-12, later-10, job-3
    assert [j.id for j in work.jobs()] == ["job-0", "job-1", "job-2", "job-4", "job-5"]
