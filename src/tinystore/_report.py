"""A serving worker's line per queue, now and then: what its attempts did since the last one.

A line per successful attempt costs a worker about as much as the attempt
itself, so a job that is done, snoozed or asked to run again is logged at
debug only; failures keep their own lines (warning, and error when a job
failed for good). Instead, every ``REPORT_EVERY`` seconds of the store's
clock, and once more when the worker stops, each queue whose attempts ended
meanwhile gets one info line: how many were done, retried, snoozed and
failed for good, and how long their handlers ran. A queue where nothing
ended says nothing.
"""

from __future__ import annotations

from typing import Optional

REPORT_EVERY = 60.0
OUTCOMES = ("done", "retried", "snoozed", "failed")


class Tally:
    """One queue's attempts that ended since its last line: per outcome (``_settle.outcome``), and run times."""

    __slots__ = ("counts", "seconds", "longest")

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self.seconds = 0.0
        self.longest = 0.0

    def add(self, outcome: str, took: float) -> None:
        self.counts[outcome] += 1
        self.seconds += took
        if took > self.longest:
            self.longest = took

    def line(self, queue: str, period: float, running: int) -> Optional[str]:
        """The line about ``queue`` for the last ``period`` seconds, then start counting anew; None when no
        attempt ended."""
        ended = sum(self.counts.values())
        if not ended:
            return None
        counts = ", ".join(f"{n:,} {outcome}" for outcome, n in self.counts.items() if n)
        text = (f"queue {queue}: {ended:,} attempts ended in the last {period:.0f}s ({counts}); handlers ran "
                f"{self.seconds / ended:.3f}s on average, {self.longest:.3f}s at most; {running} running now")
        self._clear()
        return text
