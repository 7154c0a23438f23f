"""What an operator's page reads beyond ``stats``: per-minute counts, and how full a queue's limits are.

Part of the ``Backend`` interface (``_base``), kept in a file of its own:
each read is indexed and returns a few rows, however many jobs a store holds.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


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


class Reads(ABC):
    @abstractmethod
    def minute_counts(self, since: int) -> list[MinuteCounts]:
        """Every queue's counts per minute from minute ``since`` on, by queue and minute (the store keeps
        a day of them)."""

    @abstractmethod
    def usage(self, queue: str, since: float, groups: int) -> Usage:
        """The queue's starts after ``since`` (kept only for a queue with a rate), and its ``groups``
        groups with the most live leases."""
