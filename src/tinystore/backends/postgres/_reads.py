"""The reads of an operator's page on PostgreSQL (``backends._reads``), its statements in ``reads.sql``."""

from __future__ import annotations

from .._reads import GroupRunning, MinuteCounts, Usage


class PostgresReads:
    """Mixed into ``PostgresBackend``: its ``_read`` gives a pooled connection, ``q.name`` its schema."""

    def minute_counts(self, since: int) -> list[MinuteCounts]:
        r = self.q.reads  # type: ignore[attr-defined]
        with self._read() as conn:  # type: ignore[attr-defined]
            return [MinuteCounts(*row) for row in conn.all(r["minute_counts"], (since,))]

    def usage(self, queue: str, since: float, groups: int) -> Usage:
        r = self.q.reads  # type: ignore[attr-defined]
        with self._read(snapshot=True, queue=queue) as conn:  # type: ignore[attr-defined]
            started = conn.one(r["starts_since"], (queue, since))[0]
            busiest = [GroupRunning(*row) for row in conn.all(r["busiest_groups"], (queue, groups))]
        return Usage(started, busiest)
