"""Serve a store's queues: import MODULE, take its Store attribute, run its handlers until SIGTERM or SIGINT.

The first SIGTERM or SIGINT stops claiming, lets running handlers finish
within --grace, gives back the jobs claimed but not started (their attempts
not counted) and exits 0. A second signal exits at once; the next open of
the store ends this process's leases, as after a crash.

A store that cannot be written for a while (no space, an I/O error, the
write lock held by another process past lock_timeout) is waited out, logged
once when it begins and once when it ends. When the worker cannot go on (any
other error of the store, or 5 minutes of such failures) it stops as on
SIGTERM and exits 1, its last line saying why, for a supervisor to restart it.

With --metrics-port it serves the store's metrics (``tinystore.metrics``) at
``http://127.0.0.1:PORT/metrics`` while it serves, and logs where.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import re
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from tinystore import Error, Store, backends
from tinystore._durations import parse_duration
from tinystore._store import queues_served

from ._common import CommandError

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

NAME = "worker"
HELP = "serve a store's queues: tinystore worker app.jobs:store"

log = logging.getLogger("tinystore.cli")

# A job's fields on a record (tinystore._events.fields), and the names the line shows them by.
JOB_FIELDS = (("tinystore_queue", "queue"), ("tinystore_job", "job"), ("tinystore_attempt", "attempt"))
URL = re.compile(r"postgres(?:ql)?://[^\s'\"]+")  # a URL in a traceback's source line or a message
LINGER = 1.0  # how long exit waits for handler threads still running past the grace period


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="MODULE:ATTRIBUTE",
                        help="where the Store is, e.g. app.jobs:store (the current folder is on the import path)")
    parser.add_argument("--queues", help="serve only these queues, comma-separated (default: every queue "
                                         "with a handler)")
    parser.add_argument("--workers", type=positive_int, metavar="N",
                        help="handlers at once, per queue (default: 16 threads for def handlers, "
                             "200 for async def)")
    parser.add_argument("--grace", default="30s",
                        help="how long running handlers may finish after SIGTERM (default 30s)")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    parser.add_argument("--metrics-port", type=port, metavar="PORT",
                        help="serve Prometheus metrics at http://HOST:PORT/metrics (0: any free port)")
    parser.add_argument("--metrics-host", default="127.0.0.1",
                        help="the address --metrics-port binds (default 127.0.0.1: this machine only)")


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    grace = parse_duration(args.grace, "--grace")
    queues = _queue_list(args.queues)
    store = load_store(args.target)
    _tinystore_level(args.log_level)  # again: importing the application may have changed it
    return serve(store, queues, args.workers, grace, args.target, args.metrics_port, args.metrics_host)


def serve(store: Store, queues: "list[str] | None", workers: "int | None", grace: float, target: str,
          metrics_port: "int | None" = None, metrics_host: str = "127.0.0.1") -> int:
    """Serve ``queues`` (every queue with a handler where None) until SIGTERM or SIGINT, with metrics on
    ``metrics_port`` where given, close the store, and return the exit status: 0, or 1 when the worker
    could not go on (its last line says why)."""
    try:
        served = [q.name for q in queues_served(store, queues)]
        if not served:
            raise CommandError(f"{target} has no queue with a handler: register one with @queue.work")
        metrics = _serve_metrics(store, metrics_port, metrics_host)
        log.info("worker %d started on %s: queues %s, grace %gs", os.getpid(), store.location, ", ".join(served),
                 grace, extra={"queues": served})
        try:
            store.serve(workers=workers, queues=served, grace=grace)
        except Error as exc:  # it could not go on: say why, and exit 1 for a supervisor to restart it
            failure: "Error | None" = exc
        else:
            failure = None
        finally:
            if metrics is not None:
                metrics.shutdown()
                metrics.server_close()
    finally:
        _close_quietly(store)
    if failure is not None:
        log.error("worker %d stopped: %s", os.getpid(), failure)
        return _exit_past_lingering_handlers(1)
    log.info("worker %d stopped", os.getpid())
    return _exit_past_lingering_handlers(0)


def _serve_metrics(store: Store, port: "int | None", host: str) -> "ThreadingHTTPServer | None":
    """The HTTP server of --metrics-port, serving from now on; None without it."""
    if port is None:
        return None
    from tinystore import metrics
    try:
        server = metrics.serve_http(store, port, host)
    except OSError as exc:
        raise CommandError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    bound_host, bound_port = server.server_address[:2]
    log.info("metrics at http://%s:%d/metrics", bound_host, bound_port)
    return server


def _close_quietly(store: Store) -> None:
    """Close the store; a store that cannot be written now cannot record that this process left, which
    the next open finds out for itself (as after a crash)."""
    try:
        store.close()
    except Error as exc:
        log.warning("the store could not record that worker %d left (%s); the next open ends its leases",
                    os.getpid(), exc)


def load_store(target: str) -> Store:
    """The Store at ``module:attribute``, with the current folder on the import path."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise CommandError(f"{target!r} must be MODULE:ATTRIBUTE, such as app.jobs:store")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        if not _names_the_target(exc, module_name):
            _print_traceback(exc)  # where in the application the import failed; the one-line error follows
        _close_every_store()  # a package above it, or the module before it failed, may have opened one
        raise CommandError(_urls_shown(f"cannot import {module_name}: {type(exc).__name__}: {exc}")) from None
    found: Any = module
    try:
        for part in attribute.split("."):
            if not hasattr(found, part):
                raise CommandError(f"{module_name} has no attribute {attribute!r}")
            found = getattr(found, part)
        if not isinstance(found, Store):
            raise CommandError(f"{target} is a {type(found).__name__}, not a tinystore.Store")
    except CommandError:
        _close_every_store()
        raise
    return found


def _close_every_store() -> None:
    """Close the stores the application's modules opened, wherever they keep them, so that a refused
    worker leaves no trace of its process in them. This process opened no other store."""
    for value in gc.get_objects():
        if isinstance(value, Store):
            value.close()


def _names_the_target(exc: Exception, module_name: str) -> bool:
    """Whether the import failed because MODULE (or a package above it) is not there: nothing to trace."""
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    return missing is not None and (module_name == missing or module_name.startswith(missing + "."))


def _print_traceback(exc: Exception) -> None:
    """The traceback of a failed import on stderr, from the application's first frame: the frames of this
    command and of importlib come before it and say nothing about the application."""
    tb = exc.__traceback__
    while tb is not None and _is_machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    sys.stderr.write(_urls_shown(text))  # its source lines may spell out a URL with its password
    sys.stderr.flush()


def _urls_shown(text: str) -> str:
    """``text`` with each PostgreSQL URL in it as messages show one: without its password."""
    return URL.sub(lambda found: backends.shown(found.group(0)), text)


def _is_machinery(filename: str) -> bool:
    return (filename == __file__ or filename.startswith("<frozen importlib")
            or os.path.dirname(filename) == os.path.dirname(importlib.__file__))


def _queue_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise CommandError("--queues needs at least one queue name")
    return names


def positive_int(text: str) -> int:
    """argparse's type of a count of at least 1 (--workers; Django's command takes it too)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def port(text: str) -> int:
    """argparse's type of a port number (--metrics-port; Django's command takes it too)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} must be a port from 0 to 65535")
    return value


def _exit_past_lingering_handlers(code: int) -> int:
    """A ``def`` handler cancelled past the grace period may still run in its thread; its job has gone
    to the next attempt and nothing it writes takes effect, so exit without waiting for it."""
    deadline = time.monotonic() + LINGER
    for thread in threading.enumerate():
        if thread.name.startswith("tinystore-handler"):
            thread.join(max(0.0, deadline - time.monotonic()))
    lingering = [t for t in threading.enumerate() if t.name.startswith("tinystore-handler") and t.is_alive()]
    if not lingering:
        return code
    log.warning("%d handler threads still run past the grace period; exiting without them", len(lingering))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Formatter(logging.Formatter):
    """Text lines; a record about a job ends with queue=, job= and attempt=."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = [f"{shown}={getattr(record, name)}" for name, shown in JOB_FIELDS
                  if getattr(record, name, None) is not None]
        if not fields:
            return text
        first, newline, rest = text.partition("\n")  # on the record's own line, before a traceback
        return f"{first} [{' '.join(fields)}]{newline}{rest}"


def configure_logging(level: str) -> None:
    """Records at ``level`` and above go to stderr, tinystore's own whatever the application does to the
    root logger's level (``logging.getLogger().setLevel(logging.WARNING)`` to quiet its libraries)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Formatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper())
    _tinystore_level(level)


def _tinystore_level(level: str) -> None:
    """The level of the ``tinystore`` logger, which its ``tinystore.*`` loggers inherit: --log-level's."""
    logging.getLogger("tinystore").setLevel(level.upper())
