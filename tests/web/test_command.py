"""``tinystore dashboard``: the address it prints, the token it takes or makes, and what it refuses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from webtools import WAIT, Dashboard

import kits
import tinystore


@pytest.fixture
def store_file(tmp_path: Path) -> str:
    path = str(tmp_path / "app.db")
    with tinystore.open(path) as store:
        store.queue("mail").add({"to": "ann"}, id="mail:ann", delay="1h")
    return path


def test_it_serves_on_loopback_and_makes_and_prints_a_token_when_given_none(store_file: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TINYSTORE_TOKEN"}
    dashboard = Dashboard(store_file, env=dict(env, PYTHONUNBUFFERED="1"))
    try:
        assert dashboard.url.startswith("http://127.0.0.1:") and not dashboard.url.endswith(":0/")
        assert store_file in dashboard.first_line
        token_line = dashboard.process.stdout.readline()
        token = re.search(r"token for actions: (\S+)", token_line).group(1)
        assert f"{dashboard.url}#token={token}" in token_line
        with httpx.Client(base_url=dashboard.url, timeout=WAIT) as client:
            assert client.get("/api/overview").json()["totals"]["scheduled"] == 1
            cancel = {"queue": "mail", "id": "mail:ann"}
            assert client.post("/api/cancel", json=cancel).status_code == 403
            assert client.post("/api/cancel", json=cancel, headers={"X-Tinystore-Token": token}).json()["done"]
    finally:
        out, err = dashboard.stop()
    assert dashboard.process.returncode == 0, err


def test_the_token_of_tinystore_token_is_taken_and_not_printed(store_file: str) -> None:
    dashboard = Dashboard(store_file, env=dict(os.environ, TINYSTORE_TOKEN="from-the-env", PYTHONUNBUFFERED="1"))
    try:
        with httpx.Client(base_url=dashboard.url, timeout=WAIT) as client:
            answer = client.post("/api/cancel", json={"queue": "mail", "id": "mail:ann"},
                                 headers={"X-Tinystore-Token": "from-the-env"})
            assert answer.json()["done"] is True
    finally:
        out, err = dashboard.stop()
    assert "from-the-env" not in dashboard.first_line + out + err


@pytest.mark.parametrize("args, message", [
    (["nowhere.db"], "nowhere.db"),
    (["{store}", "--port", "http"], "'http' is not a port"),
    (["{store}", "--port", "70000"], "'70000' is not a port"),
    (["{store}", "--host", "no.such.host.invalid"], "cannot listen on no.such.host.invalid"),
])
def test_bad_input_is_one_line_and_exit_status_2(store_file: str, tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    args = [a.replace("{store}", store_file) for a in args]
    done = subprocess.run([sys.executable, "-m", "tinystore.cli", "dashboard", *args], capture_output=True,
                          text=True, timeout=WAIT, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""
    assert not (tmp_path / "nowhere.db").exists()


BLOCKED = "import sys; sys.modules['starlette'] = None  # as where tinystore[web] is not installed\n"


def test_without_the_web_extra_the_command_and_the_app_say_what_to_install(store_file: str) -> None:
    command = BLOCKED + f"from tinystore.cli import main; sys.exit(main(['dashboard', {store_file!r}]))"
    done = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 2 and 'pip install "tinystore[web]"' in done.stderr
    app = BLOCKED + f"import tinystore, tinystore.web; tinystore.web.app(tinystore.open({store_file!r}), token='t')"
    done = subprocess.run([sys.executable, "-c", app], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 1
    assert 'ModuleNotFoundError: the dashboard needs Starlette: pip install "tinystore[web]"' in done.stderr


def test_a_postgresql_store_is_served_and_its_password_never_printed(tmp_path: Path) -> None:
    kit = kits.PostgresKit(tmp_path)
    try:
        target = kit.new_target("dash").replace("postgres@", "postgres:hunter2@")  # the server trusts: ignored
        with tinystore.open(target) as store:
            store.queue("mail").add({"to": "ann"}, delay="1h")
        dashboard = Dashboard(target, "--token", "t")
        try:
            with httpx.Client(base_url=dashboard.url, timeout=WAIT) as client:
                overview = client.get("/api/overview")
        finally:
            out, err = dashboard.stop()
        assert overview.json()["totals"]["scheduled"] == 1 and "hunter2" not in overview.text
        assert "hunter2" not in dashboard.first_line + out + err
        assert "127.0.0.1:5432" in dashboard.first_line
    finally:
        kit.cleanup()
