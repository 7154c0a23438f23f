"""FastAPI with tinystore's workers in its lifespan, served by a real uvicorn process over real HTTP.

The app is ``examples/fastapi_lifespan.py``: a request writes a photo's row
and adds its thumbnail's job in one transaction; the lifespan's worker makes
the thumbnail; SIGTERM lets a running handler finish before the server exits.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import tinystore
from helpers import stderr_of, wait_child

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def request(base: str, method: str, path: str) -> tuple[int, Any]:
    """The status and JSON body of a request; the server's first answers may wait in the socket's backlog."""
    try:
        with urlopen(Request(base + path, method=method), timeout=60) as response:
            return response.status, json.loads(response.read())
    except HTTPError as error:
        return error.code, json.loads(error.read())


def wait_for_state(queue: tinystore.Queue, id: str, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (job := queue.get(id)) is None or job.state != state:
        assert time.monotonic() < deadline, f"job {id} is {job and job.state}, not {state}, after {timeout:g}s"
        time.sleep(0.02)


def test_a_request_commits_its_row_and_job_together_the_lifespan_runs_it_and_sigterm_lets_it_finish(
        tmp_path: Path) -> None:
    listening = socket.create_server(("127.0.0.1", 0))  # uvicorn serves this socket: its port is known now
    base = f"http://127.0.0.1:{listening.getsockname()[1]}"
    store_file = tmp_path / "app.db"
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--app-dir", str(EXAMPLES), "fastapi_lifespan:app",
         "--fd", str(listening.fileno())], pass_fds=[listening.fileno()], cwd=tmp_path,
        env={**os.environ, "TINYSTORE_FILE": str(store_file)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    listening.close()
    store = tinystore.open(store_file)
    try:
        status, quick = request(base, "POST", "/photos/8?name=dog.jpg")
        assert (status, quick["state"]) == (201, "waiting")
        wait_for_state(store.queue("thumbnails"), quick["job"], "done")  # the lifespan's worker ran it
        assert request(base, "GET", "/photos/8") == (200, {"name": "dog.jpg", "thumbnail": "thumb-dog.jpg"})

        status, slow = request(base, "POST", "/photos/7?name=cat.jpg&seconds=2")
        assert status == 201
        assert request(base, "POST", "/photos/7?name=other.jpg") == (409, {"detail": "photo 7 exists"})
        assert store.query("select id, name from photos order by id") == [(7, "cat.jpg"), (8, "dog.jpg")]
        assert sorted(job.id for job in store.queue("thumbnails").jobs()) == sorted([quick["job"], slow["job"]])

        wait_for_state(store.queue("thumbnails"), slow["job"], "running")
        server.send_signal(signal.SIGTERM)
        # uvicorn shuts down, then ends by the signal it handled (since 0.29; before, with status 0)
        assert wait_child(server) in (0, -signal.SIGTERM), stderr_of(server)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    try:
        assert store.queue("thumbnails").get(slow["job"]).state == "done"  # it finished within the grace period
        assert store.query("select thumbnail from photos where id = 7") == [("thumb-cat.jpg",)]
        assert "Application shutdown complete." in stderr_of(server)
    finally:
        store.close()
