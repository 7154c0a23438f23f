"""``python manage.py tinystore_worker``: run the tasks of a tinystore task backend until SIGTERM or SIGINT.

Its options are ``tinystore worker``'s: ``--queues`` (default: the backend's
QUEUES, or with QUEUES = [] every queue the store holds as it starts), ``--workers``, ``--grace``, ``--log-level``, ``--metrics-port`` and
``--metrics-host``; ``--backend`` names the TASKS alias (default
``default``). The first SIGTERM or SIGINT claims nothing more and lets
running tasks finish within the grace period; the command exits 0, or 1 when
the worker could not go on. A SIGTERM or SIGINT that comes while it starts
(Django's checks, opening the store) exits 0 at once, having claimed nothing.
A task that raises, SystemExit and KeyboardInterrupt included, fails its
attempt; the worker goes on.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.tasks import task_backends
from django.tasks.exceptions import InvalidTaskBackend

if TYPE_CHECKING:
    from ..._backend import TaskBackend

# tinystore is imported once the signals are handled (run_from_argv), not when Django loads this module.


class StoppedWhileStarting(BaseException):
    """A SIGTERM or SIGINT came before the worker served: nothing was claimed."""


def _stop_while_starting(signum: int, frame: Any) -> None:
    raise StoppedWhileStarting(signum)


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no types: its base class is Any to mypy
    help = "Run the tasks of a tinystore task backend until SIGTERM or SIGINT."

    def run_from_argv(self, argv: list[str]) -> None:
        # From here until the store serves (which handles the signals itself), a signal exits 0.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _stop_while_starting)
        try:
            super().run_from_argv(argv)
        except StoppedWhileStarting as stopped:  # the stores opened close at exit
            sys.stderr.write(f"{signal.Signals(stopped.args[0]).name} while starting: stopped before serving\n")
            sys.exit(0)

    def add_arguments(self, parser: CommandParser) -> None:
        from tinystore.cli import worker
        parser.add_argument("--backend", default="default", help="the TASKS alias (default: default)")
        parser.add_argument("--queues", help="run only these queues, comma-separated (default: the backend's "
                                             "QUEUES; with QUEUES = [], every queue the store holds)")
        parser.add_argument("--workers", type=worker.positive_int, metavar="N",
                            help="tasks at once per queue (default 16, each in a thread)")
        parser.add_argument("--grace", default="30s",
                            help="how long running tasks may finish after SIGTERM (default 30s)")
        parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
        parser.add_argument("--metrics-port", type=worker.port, metavar="PORT",
                            help="serve Prometheus metrics at http://HOST:PORT/metrics (0: any free port)")
        parser.add_argument("--metrics-host", default="127.0.0.1",
                            help="the address --metrics-port binds (default 127.0.0.1: this machine only)")

    def handle(self, *args: Any, backend: str, queues: "str | None", workers: "int | None", grace: str,
               log_level: str, metrics_port: "int | None", metrics_host: str, **options: Any) -> None:
        from tinystore import Error
        from tinystore._durations import parse_duration
        from tinystore.cli import worker
        from tinystore.cli._common import CommandError as CliError
        tasks = _backend(backend)
        names = [q.strip() for q in queues.split(",") if q.strip()] if queues else tasks.queue_names()
        unknown = [q for q in names if tasks.queues and q not in tasks.queues]
        if unknown:
            raise CommandError(f"--queues {', '.join(unknown)}: not in the QUEUES of task backend {backend!r}")
        try:
            seconds = parse_duration(grace, "--grace")
            worker.configure_logging(log_level)
            tasks.serve_queues(names)
        except Error as exc:
            raise CommandError(str(exc)) from None
        try:
            code = worker.serve(tasks.store, names, workers, seconds, f"task backend {backend!r}", metrics_port,
                                metrics_host)
        except CliError as exc:
            raise CommandError(str(exc)) from None
        if code:
            sys.exit(code)


def _backend(alias: str) -> "TaskBackend":
    from ..._backend import TaskBackend
    try:
        backend = task_backends[alias]
    except InvalidTaskBackend as exc:
        raise CommandError(f"--backend {alias}: {exc}") from None
    if not isinstance(backend, TaskBackend):
        raise CommandError(f"task backend {alias!r} is {type(backend).__module__}.{type(backend).__name__}, "
                           f"not tinystore.contrib.django.TaskBackend")
    return backend
