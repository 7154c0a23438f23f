"""The statements the PostgreSQL backend runs, by name (the engine's shared ones and queries.sql's), and
its migrations, for one schema.

Every statement names tinystore's tables with their schema (``{schema}`` in
the files, replaced by the quoted name, which ``open_backend`` validated):
the application's own connections keep their search_path, so that its SQL
never finds tinystore's tables instead of its own.
"""

from __future__ import annotations

import zlib
from functools import lru_cache
from typing import TYPE_CHECKING

from ..._package import migrations, read
from .._engine.statements import Statements, catalogue, parse, pyformat

_QUERIES = catalogue(parse(read(__package__, "queries.sql")),
                     lambda sql: pyformat(sql, "{schema}"))
_READS = parse(read(__package__, "reads.sql"))
_MIGRATIONS: list[tuple[int, str]] = migrations(__package__)


# A claim's picks lock the due rows they read and pass over the rows another claim holds (as River and
# pgqueuer take jobs): claims of a queue from many processes never wait for each other (see _writer).
# A limited queue's claims run one at a time under its lock, and pick without skipping: a row that
# something else holds for a moment (a watcher's FOR SHARE) must not let a later job start before it
# (JOB-01 within a group, and with concurrency=1).
PICKS = {"due_ungrouped", "due_in_group"}
SKIP_LOCKED = "\nFOR UPDATE SKIP LOCKED"
# Expiries run in every process's claim cycles at once, under no lock: each locks the expired leases it
# reads and passes over those another transaction holds (an expiry, a settlement, a renewal, a step being
# kept), which a later cycle ends. Two expiries that waited for each other's rows, taken in different
# orders, deadlocked; each deadlock held both writers for the server's deadlock_timeout, while leases ran
# out and gave the next cycles more expiries to fight over.
PASS_OVER = PICKS | {"leases_expired"}


def _key(text: str) -> int:
    """A non-negative int4 from text, stable across processes and versions."""
    return zlib.crc32(text.encode("utf-8")) & 0x7FFFFFFF


class Schema:
    """Everything named after one schema: its statements, migrations, advisory-lock keys and channel."""

    def __init__(self, name: str):
        self.name = name
        self.quoted = f'"{name}"'
        # The first int4 of the two-key advisory locks: one for the queues' locks (the second key is
        # hashtext(queue)), one for the processes' liveness locks (the second is the registration id;
        # 0, which no registration has, serializes migrations).
        self.queue_key = _key(f"tinystore queue {name}")
        self.live_key = _key(f"tinystore live {name}")
        if self.live_key == self.queue_key:
            self.live_key ^= 1
        # Two more: a group's row lock (lock_groups), and the fold of a queue's counts (counts_fold).
        self.group_key = _key(f"tinystore group {name}")
        self.fold_key = _key(f"tinystore fold {name}")
        # The NOTIFY channel (an identifier: at most 63 bytes), unique per schema.
        self.channel = f"tinystore_{self.queue_key:08x}_{name}"[:63]
        self.statements = Statements({query: self.named(sql) + (SKIP_LOCKED if query in PASS_OVER else "")
                                      for query, sql in _QUERIES.items()})
        self.serial_picks = {query: self.named(_QUERIES[query]) for query in PICKS}  # under the queue's lock
        self.reads = Statements({query: self.named(sql) for query, sql in _READS.items()})  # (_reads)
        self.__dict__.update(self.statements)

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> str:
            """A statement by its name: ``statements`` are attributes too (set above)."""

    def named(self, sql: str) -> str:
        return sql.replace("{schema}", self.quoted).replace("{channel}", self.channel)

    def migrations(self) -> list[tuple[int, str]]:
        return [(version, self.named(script)) for version, script in _MIGRATIONS]


@lru_cache(maxsize=None)
def schema(name: str) -> Schema:
    return Schema(name)
