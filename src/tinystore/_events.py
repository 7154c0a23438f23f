"""What the core tells about jobs as they move: the calls metrics observe, and the fields of log records.

A store's ``Context.events`` is None until something observes it
(``tinystore.metrics.enable``): each place that would tell it is then one
test of an attribute, so a store nobody observes pays nothing for it. An
observer is called on the thread where the thing happens (the worker's
loop, or the thread that adds), by every worker of the store, and must be
quick.

Every log record tinystore writes about a job carries the same ``extra``
fields (``fields``), so that a JSON formatter can follow one job across its
attempts and processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Protocol

if TYPE_CHECKING:  # types only: the backends log with fields, and import nothing of the core's at import
    from .backends._base import Claimed, Settlement


class Events(Protocol):
    def added(self, queue: str, count: int) -> None:
        """``add`` or ``add_many`` wrote ``count`` new jobs (with ``tx=`` or ``conn=``: before that commit)."""

    def claimed(self, queue: str, claimed: list[Claimed], now: float) -> None:
        """These jobs were claimed and their handlers start at ``now``; each was due at its ``at``."""

    def ran(self, queue: str, seconds: float) -> None:
        """An attempt's handler ended after running ``seconds``, and how its job goes on was decided."""

    def settled(self, queue: str, settlements: list[Settlement], stale: list[Settlement]) -> None:
        """These settlements were written; the ``stale`` among them changed nothing (JOB-05)."""


def fields(queue: str, job: str, attempt: int, outcome: Optional[str] = None,
           duration: Optional[float] = None) -> dict[str, Any]:
    """The ``extra`` of a log record about one attempt of a job.

    ``tinystore_outcome`` is "started" when the attempt begins, how it ended
    (``outcome``) when it ends, None on records in between; ``tinystore_duration``
    is how long its handler ran, in seconds, on the record of its end.
    """
    return {"tinystore_queue": queue, "tinystore_job": job, "tinystore_attempt": attempt,
            "tinystore_outcome": outcome, "tinystore_duration": duration}
