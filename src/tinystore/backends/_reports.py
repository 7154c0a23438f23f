"""What a check of a store found (``backends.check``): a report, and the jobs it could not read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class UnreadableJob:
    """A job whose id or payload cannot be read as the store keeps it, and why."""

    seq: int
    queue: str
    id: str
    why: str


@dataclass(frozen=True)
class CheckReport:
    """What a check of a store found.

    ``method`` names the check that ran (SQLite's ``integrity_check`` or
    ``quick_check``); ``pages`` and ``jobs`` are how many it read, or None
    where it could not; ``problems`` are what the database's own check said;
    ``advice``, where it is not ``ok``, says what to do.
    """

    location: str
    method: str
    ok: bool
    pages: Optional[int]
    jobs: Optional[int]
    problems: list[str]
    unreadable_jobs: list[UnreadableJob]
    advice: Optional[str]
