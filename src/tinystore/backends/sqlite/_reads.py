"""The reads of an operator's page on SQLite (``backends._reads``), its statements in ``reads.sql``."""

from __future__ import annotations

from .._reads import GroupRunning, MinuteCounts, Usage
from ._sql import R


class SQLiteReads:
    """Mixed into ``SQLiteBackend``: its ``_read`` gives one read transaction on this thread's connection."""

    def minute_counts(self, since: int) -> list[MinuteCounts]:
        with self._read() as conn:  # type: ignore[attr-defined]
            return [MinuteCounts(*row) for row in conn.execute(R.minute_counts, (since,))]

    def usage(self, queue: str, since: float, groups: int) -> Usage:
        with self._about(queue), self._read() as conn:  # type: ignore[attr-defined]
            started = conn.execute(R.starts_since, (queue, since)).fetchone()[0]
            busiest = [GroupRunning(*row) for row in conn.execute(R.busiest_groups, (queue, groups))]
        return Usage(started, busiest)
