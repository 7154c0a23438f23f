"""``tinystore worker`` refuses what it cannot serve in one line, exits 2, and changes nothing.

Each test starts all its refused workers at once, as separate processes.
"""

from __future__ import annotations

from clitools import App, Worker

MODULES = {
    "broken_import": "raise RuntimeError('no config')\n",
    "broken_syntax": "def f(:\n",
    "idle": "import os, tinystore\nstore = tinystore.open(os.environ['TINYSTORE_TEST_DB'])\n",
}


def refused(worker: Worker) -> str:
    assert worker.wait() == 2, worker.err
    assert len(worker.err) == 2 and worker.err[1] == "", worker.err  # one line, then the end of the stream
    return worker.err[0]


def test_a_target_that_is_not_a_store_with_handlers_is_refused(app: App) -> None:
    for name, source in MODULES.items():
        (app.folder / f"{name}.py").write_text(source)
    app.open().queue("echo").add({}, id="e1")
    before = app.dump()
    expected = {
        "no_such_module:store": "cannot import no_such_module: ModuleNotFoundError: No module named 'no_such_module'",
        "broken_import:store": "cannot import broken_import: RuntimeError: no config",
        "broken_syntax:store": "cannot import broken_syntax: SyntaxError: ",
        "app_jobs:stor": "app_jobs has no attribute 'stor'",
        "app_jobs:echo": "app_jobs:echo is a Queue, not a tinystore.Store",
        "app_jobs": "'app_jobs' must be MODULE:ATTRIBUTE, such as app.jobs:store",
        "idle:store": "idle:store has no queue with a handler: register one with @queue.work",
    }
    workers = {target: app.worker(target=target) for target in expected}
    for target, message in expected.items():
        assert refused(workers[target]).startswith(f"tinystore: error: {message}"), target
    assert app.dump() == before
    assert app.witnessed() == []


def test_options_the_worker_cannot_honour_are_refused(app: App) -> None:
    app.open().queue("echo").add({}, id="e1")
    before = app.dump()
    expected = {
        ("--queues", "echo,nope"): "tinystore: error: no handler is registered for queue(s) 'nope'",
        ("--grace", "a while"): "tinystore: error: --grace 'a while' is not a duration",
        ("--workers", "0"): "tinystore worker: error: argument --workers: '0' must be at least 1",
    }
    workers = {args: app.worker(*args) for args in expected}
    for args, message in expected.items():
        assert refused(workers[args]).startswith(message), args
    assert app.dump() == before
    assert app.witnessed() == []
