"""Whether a write may run on the caller's own thread.

A sync caller waits for its write anyway, so the SQLite writer runs it on
the caller's thread when the write lock is free (see ``sqlite/_writer``).
An awaited call (``_awaiting``) must not: its thread runs an event loop,
which would stall for the commit's fsync and for another process's write
lock. It marks its context while it submits, and the writer hands such a
write to its writer thread. (A worker's own claim cycles still run inline:
that loop is the worker's, and waits for its cycle anyway.)
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_handed_off: ContextVar[bool] = ContextVar("tinystore_handed_off", default=False)


@contextmanager
def handed_off() -> Iterator[None]:
    """Within the block, writes submitted from this context run on the writer's thread."""
    token = _handed_off.set(True)
    try:
        yield
    finally:
        _handed_off.reset(token)


def may_run_inline() -> bool:
    """Whether a write submitted now may run on the caller's thread."""
    return not _handed_off.get()
