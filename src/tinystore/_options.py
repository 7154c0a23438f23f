"""A queue's options: parsed from what users give, kept in the store as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from typing import Any, Mapping, Optional, TypedDict

from ._durations import Duration, Rate, parse_duration, parse_rate
from ._errors import InvalidArgument


class QueueOptionArgs(TypedDict, total=False):
    """The options ``store.queue`` and ``store.schedule`` take as keyword arguments, with their types: an
    option not given keeps the value the store keeps (its default for a new queue). ``store.queue`` says
    what each means. A type checker refuses a misspelt option or a value of the wrong type; at run time a
    bad one is ``InvalidArgument`` naming the queue, and nothing is kept.
    """

    concurrency: Optional[int]
    rate: Optional[Rate]
    group_concurrency: Optional[int]
    group_rate: Optional[Rate]
    attempts: int
    backoff: tuple[Duration, Duration]
    timeout: Optional[Duration]
    lease: Duration
    dedupe: Duration
    keep: Duration


@dataclass(frozen=True)
class QueueOptions:
    """Every option of a queue, in seconds and counts. ``None`` means no limit.

    ``paused`` is kept with them so that every claim reads it with the limits, in its own
    transaction; only ``Queue.pause`` and ``Queue.resume`` change it, never ``store.queue``.
    """

    concurrency: Optional[int] = None
    rate: Optional[tuple[int, float]] = None
    group_concurrency: Optional[int] = None
    group_rate: Optional[tuple[int, float]] = None
    attempts: int = 10
    backoff: tuple[float, float] = (1.0, 3600.0)
    timeout: Optional[float] = 60.0
    lease: float = 30.0
    dedupe: float = 0.0
    keep: float = 7 * 86400.0
    paused: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "QueueOptions":
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known}
        return cls(**values)

    @staticmethod
    @lru_cache(maxsize=1024)
    def kept(text: str) -> "QueueOptions":
        """The options as a store keeps them (JSON text), parsed once per text: every claim cycle reads them."""
        return QueueOptions.from_json(json.loads(text))

    def backoff_for(self, attempt: int) -> float:
        """The wait after failed attempt number ``attempt`` (1-based), before jitter."""
        first, longest = self.backoff
        return min(longest, first * 2.0 ** min(attempt - 1, 64))


def _positive_int(name: str, value: Any, allow_none: bool) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{name}={value!r} must be an int of at least 1")
    return value


def parse_options(base: QueueOptions, given: Mapping[str, Any]) -> QueueOptions:
    """``base`` with the options in ``given`` changed; InvalidArgument for a bad one."""
    changes: dict[str, Any] = {}
    for name, value in given.items():
        if name in ("concurrency", "group_concurrency"):
            changes[name] = _positive_int(name, value, allow_none=True)
        elif name == "attempts":
            changes[name] = _positive_int(name, value, allow_none=False)
        elif name in ("rate", "group_rate"):
            changes[name] = None if value is None else parse_rate(value, name)
        elif name == "backoff":
            if not isinstance(value, (tuple, list)) or len(value) != 2:
                raise InvalidArgument(f"backoff={value!r} must be (first wait, longest wait)")
            first, longest = (parse_duration(v, "backoff") for v in value)
            if first <= 0 or longest < first:
                raise InvalidArgument(f"backoff={value!r}: the first wait must be positive and at most the longest")
            changes[name] = (first, longest)
        elif name == "timeout" and value is None:
            changes[name] = None  # no timeout (JOB-09)
        elif name in ("timeout", "lease"):
            seconds = parse_duration(value, name)
            if seconds <= 0:
                raise InvalidArgument(f"{name}={value!r} must be longer than zero")
            changes[name] = seconds
        elif name in ("dedupe", "keep"):
            changes[name] = parse_duration(value, name)
        else:
            raise InvalidArgument(f"unknown queue option {name!r}")
    return replace(base, **changes)
