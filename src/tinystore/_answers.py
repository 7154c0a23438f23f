"""What a handler can return instead of None: retry, snooze, fail.

These are answers, not errors: ``return run.retry("10m")``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Retry:
    """Run again after ``delay`` seconds; the attempt counts."""

    delay: float


@dataclass(frozen=True)
class Snooze:
    """Run again after ``delay`` seconds; the attempt does not count."""

    delay: float


@dataclass(frozen=True)
class Fail:
    """Fail for good now, with ``reason`` as the error."""

    reason: str
