"""Hearing of other connections' commits: a poll of one integer, then the notices they logged.

Another process's commit (or an application's own connection's) changes
``PRAGMA data_version`` of the writer's connection: a read of shared memory,
never a query of the jobs table, polled every 2 ms by one thread per store
however many workers and watchers listen. When it changed, the thread reads
the notices logged since it last looked (``tinystore_notices``: which queues
got work, which jobs were cancelled), skips this process's own (told at their
commit), and tells the listener one ``Notice``: so a worker wakes only the
runners of the queues that changed, and a cancel reaches its handler in any
process. A notice is told even when it names nothing, for watchers: any
commit may have changed a watched job. Notices pruned before they were read
(a process far behind) are told as ``everything``.

Failures are the core's to judge: ``on_error`` says how long to wait before
trying again, or None to stop.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Callable, Optional

from .._base import Notice, NoticeListener
from ._sql import Q

POLL_INTERVAL = 0.002


class Hearing:
    def __init__(self, cursor: int, changed: Callable[[], bool], connect: Callable[[], sqlite3.Connection],
                 own: Callable[[], Optional[int]], on_notice: NoticeListener,
                 on_error: Callable[[BaseException], Optional[float]]):
        """Hear every notice logged after ``cursor`` (the last one's id when the listener subscribed)."""
        self._changed = changed
        self._connect = connect
        self._own = own
        self._on_notice = on_notice
        self._on_error = on_error
        self._conn: Optional[sqlite3.Connection] = None
        self._cursor = cursor
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="tinystore-hearing", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        if self._conn is not None:
            self._conn.close()

    def _poll(self) -> None:
        wait = POLL_INTERVAL
        while not self._closed.wait(wait):
            wait = POLL_INTERVAL
            try:
                if not self._changed():
                    continue
                notice = self._notices()
            except Exception as exc:
                retry = self._on_error(exc)
                if retry is None:
                    return
                wait = retry
                continue
            self._on_notice(notice)

    def _read(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn.execute(sql, params).fetchall()

    def _notices(self) -> Notice:
        rows = self._read(Q.notices_since, self._cursor)
        if not rows:
            return Notice()
        own = self._own()
        first_kept = rows[0][4]
        everything = first_kept is not None and first_kept > self._cursor + 1 and self._cursor > 0
        self._cursor = rows[-1][0]
        queues: dict[str, Any] = {}
        cancelled = set()
        for _, owner, queue, job, _ in rows:
            if owner is not None and owner == own:
                continue
            if job is None:
                queues[queue] = None
            else:
                cancelled.add(job)
        return Notice(queues, frozenset(cancelled), everything)
