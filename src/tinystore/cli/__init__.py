"""The ``tinystore`` command: one module per subcommand.

- ``worker``    serve a store's queues: ``tinystore worker app.jobs:store``
- ``status``    queues by state, the oldest due job's age, the last minute's runs, which are paused
- ``jobs``      a page of a queue's jobs
- ``show``      one job: payload, attempts, error and traceback, steps, lease holder
- ``retry``     run a failed job again, or many (``_many``: ids, --state, --group, confirmed)
- ``cancel``    take a job away, or many
- ``pause``     stop every process from starting the jobs of queues (every queue when none is named)
- ``resume``    let every process start them again
- ``add``       add a job
- ``maintain``  remove what is past ``keep`` and ``dedupe`` now
- ``check``     read every page of a SQLite store file and say whether it is damaged
- ``dashboard`` serve a web page of the store's queues and jobs, with retry, cancel, pause and resume
  behind a token
- ``_common``   opening a store (read-only for the commands that only read), output for people or
  ``--json``, progress

STORE, the first argument of every command but ``worker``, is a SQLite file
or a ``postgresql://`` URL (``--schema NAME`` where tinystore's tables are not
in schema ``tinystore``); ``worker`` serves the store its module opened,
either kind. The command knows no database: it opens stores through
``tinystore.backends`` (``open_existing``, ``check``) and uses the public API;
every error of the store reaches it as a ``tinystore.Error``. A URL is never
printed with its password.

Exit status: 0 done; 1 the job was not in a state the command acts on (for
``check``: the file is damaged); 2 bad input (no such file, not a store, a
server that cannot be reached, no such database or schema, no such queue or
job, bad JSON, a module that does not import), reported in one
line on stderr with nothing changed, and a damaged store met while reading
(StoreCorrupt, saying to run ``tinystore check``); 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any, Optional, Sequence

import tinystore
from tinystore import backends

from . import add, cancel, check, dashboard, jobs, maintain, pause, resume, retry, show, status, worker
from ._common import CommandError

COMMANDS = (worker, status, jobs, show, retry, cancel, pause, resume, add, maintain, check, dashboard)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, and a value that begins with a minus and a digit is a value.

    argparse reads ``--delay -5m`` as an option ``-5m`` with ``--delay`` missing its value: only ``-5`` and
    ``-.5`` pass as values. No option of the command begins with a digit, so ``-5m`` goes to ``--delay``,
    which says what is wrong with it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d")  # argparse's own test of "a negative number"

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tinystore", description="A durable job queue in your SQLite file or PostgreSQL database.")
    parser.add_argument("--version", action="version", version=f"tinystore {tinystore.__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True, parser_class=_Parser)
    for command in COMMANDS:
        sub = commands.add_parser(command.NAME, help=command.HELP, description=command.__doc__)
        command.configure(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``tinystore`` command with ``argv`` (default ``sys.argv[1:]``); return its exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 2
    target = getattr(args, "store", None)
    try:
        status: int = args.run(args)
        return status
    except CommandError as exc:
        return _fail(str(exc), exc.code, target)
    except tinystore.Error as exc:
        return _fail(str(exc), 2, target)
    except BrokenPipeError:  # stdout's reader left (| head): nothing more to say, and nowhere to say it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:
        return _fail(f"{type(exc).__name__}: {exc}", 1, target)
    except KeyboardInterrupt:
        return 130


def _fail(message: str, code: int, target: Optional[str] = None) -> int:
    if target:  # whatever said it, a URL is never shown with its password
        message = backends.scrubbed(message, target)
    print("tinystore: error: " + " ".join(message.split()), file=sys.stderr)
    return code
