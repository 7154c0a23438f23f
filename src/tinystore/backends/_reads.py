"""What an operator's page reads beyond ``stats``: per-minute counts, and how full a queue's limits are.

Part of the ``Backend`` interface (``_base``), kept in a file of its own:
each read is indexed and returns a few rows, however many jobs a store holds.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class MinuteCounts:
    """A queue's runs begun, jobs done and jobs failed for good in one minute (``minute``: since the epoch)."""

    queue: str
    minute: int
    started: int
    done: int
    failed: int


@dataclass(frozen=True)
class GroupRunning:
    grp: str
    running: int


@dataclass(frozen=True)
class Usage:
    """How full a queue's limits are: its starts since a time (counted for its rate, which keeps them
    only where the queue has one), and its groups with the most live leases, busiest first."""

    started: int
    groups: list[GroupRunning]


def page_of(state: Optional[str], grp: Optional[str]) -> tuple[str, dict[str, Any]]:
    """The statement (in each backend's queries.sql) that pages a queue's jobs in id order with these
    filters, and the parameters of its state filter: failed jobs by their own index, running ones from
    their leases, a group's jobs by the index of grouped jobs; else a walk of the queue's ids, which
    finds a page as fast as the state asked for is common. A scheduled or waiting job is stored queued,
    due after now or not (``due``)."""
    queued: dict[Optional[str], tuple[Optional[str], Optional[bool]]] = {"scheduled": ("queued", False),
                                                                         "waiting": ("queued", True)}
    stored, due = queued.get(state, (state, None))
    if state == "failed":
        name = "jobs_page_failed"
    elif state == "running":
        name = "jobs_page_running"
    elif grp is not None:
        name = "jobs_page_group"
    else:
        name = "jobs_page"
    return name, {"stored": stored, "due": due}


class Reads(ABC):
    @abstractmethod
    def minute_counts(self, since: int) -> list[MinuteCounts]:
        """Every queue's counts per minute from minute ``since`` on, by queue and minute (the store keeps
        a day of them)."""

    @abstractmethod
    def usage(self, queue: str, since: float, groups: int) -> Usage:
        """The queue's starts after ``since`` (kept only for a queue with a rate), and its ``groups``
        groups with the most live leases."""
