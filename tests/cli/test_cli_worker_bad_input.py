"""``tinystore worker`` refuses what it cannot serve in one line, exits 2, and changes nothing.

A module that fails to import is the exception: its traceback comes first,
and the one-line error stays on the last line. Each test starts all its
refused workers at once, as separate processes.
"""

from __future__ import annotations

from clitools import App, Worker

MODULES = {
    "idle": "import os, tinystore\nstore = tinystore.open(os.environ['TINYSTORE_TEST_DB'])\n",
}


def refused_lines(worker: Worker) -> list[str]:
    """What a refused worker wrote on stderr, once it exited 2."""
    assert worker.wait() == 2, worker.err
    assert worker.err and worker.err[-1] == "", worker.err  # the end of the stream
    return worker.err[:-1]


def refused(worker: Worker) -> str:
    lines = refused_lines(worker)
    assert len(lines) == 1, lines  # one line
    return lines[0]


def test_a_target_that_is_not_a_store_with_handlers_is_refused(app: App) -> None:
    for name, source in MODULES.items():
        (app.folder / f"{name}.py").write_text(source)
    app.open().queue("echo").add({}, id="e1")
    before = app.dump()
    expected = {
        "no_such_module:store": "cannot import no_such_module: ModuleNotFoundError: No module named 'no_such_module'",
        "app_jobs.nothing:store": "cannot import app_jobs.nothing: ModuleNotFoundError: No module named 'app_jobs.",
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


APPLICATION = {
    "settings.py": "import os\n\n\ndef load():\n    raise RuntimeError('no config')\n",
    "failing_app.py": ("import os\n\nimport settings\nimport tinystore\n\n"
                       "store = tinystore.open(os.environ['TINYSTORE_TEST_DB'])\nCONFIG = settings.load()\n"),
    "needs_dependency.py": "import uses_missing\n",
    "uses_missing.py": "import no_such_dependency\n",
    "broken_syntax.py": "def f(:\n",
}


def test_a_module_that_fails_to_import_is_refused_with_its_traceback_then_the_one_line_error(app: App) -> None:
    for name, source in APPLICATION.items():
        (app.folder / name).write_text(source)
    app.open().queue("echo").add({}, id="e1")
    before = app.dump()
    expected = {
        "failing_app": ("RuntimeError: no config",
                        [("failing_app.py", 7, "<module>", "CONFIG = settings.load()"),
                         ("settings.py", 5, "load", "raise RuntimeError('no config')")]),
        "needs_dependency": ("ModuleNotFoundError: No module named 'no_such_dependency'",
                             [("needs_dependency.py", 1, "<module>", "import uses_missing"),
                              ("uses_missing.py", 1, "<module>", "import no_such_dependency")]),
    }
    workers = {module: app.worker(target=f"{module}:store") for module in [*expected, "broken_syntax"]}
    for module, (error, frames) in expected.items():
        lines = refused_lines(workers[module])
        assert lines[-1] == f"tinystore: error: cannot import {module}: {error}", lines
        assert lines[0] == "Traceback (most recent call last):", lines
        assert lines[-2] == error, lines
        text = "\n".join(lines)
        for file, number, function, source in frames:
            assert f'File "{app.folder / file}", line {number}, in {function}\n    {source}' in text, text
        assert "importlib" not in text and "tinystore/cli" not in text, "frames of the machinery, not the app"

    lines = refused_lines(workers["broken_syntax"])
    assert lines[-1].startswith("tinystore: error: cannot import broken_syntax: SyntaxError: "), lines
    text = "\n".join(lines[:-1])
    assert f'File "{app.folder / "broken_syntax.py"}", line 1' in text and "def f(:" in text, text
    assert app.dump() == before
    assert app.witnessed() == []
