"""Durations ("500ms", "1h30m", 30, timedelta) and rates ("600/m", (5, "1s")) as seconds.

A duration is zero or more seconds, at most 1000 years (365,250 days): a
delay, backoff, timeout, lease or kept time past that is a mistake, and any
time of the clock plus one of them is still a time a job can have (years 1
to 9999).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Union

from ._errors import InvalidArgument

Duration = Union[str, int, float, timedelta]
Rate = Union[str, tuple[int, Duration]]  # "600/m", or (count, period)

MAX_DURATION = 365_250 * 86400.0  # 1000 years
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_RATE = re.compile(r"\s*(\d+)\s*/\s*(\d*)\s*(ms|s|m|h|d)\s*")


def parse_duration(value: Duration, what: str = "duration") -> float:
    """Return ``value`` in seconds; raise InvalidArgument naming the bad value."""
    if isinstance(value, bool):
        raise InvalidArgument(f"{what} must be a duration, not {value!r}")
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float
            seconds = float("inf")
    elif isinstance(value, str):
        text = value.strip()
        parsed = _text_seconds(text)
        if parsed is None and text.startswith("-") and _text_seconds(text[1:]) is not None:
            raise InvalidArgument(f"{what} {value!r} is negative: a duration is zero or more, such as '30s'")
        if parsed is None:
            raise InvalidArgument(
                f"{what} {value!r} is not a duration such as '500ms', '30s', '10m', '1h30m' or '7d'"
            )
        seconds = parsed
    else:
        raise InvalidArgument(f"{what} must be a duration, not {type(value).__name__} {value!r}")
    if seconds != seconds or seconds < 0 or seconds == float("inf"):
        raise InvalidArgument(f"{what} {value!r} must be a finite number of seconds, zero or more")
    if seconds > MAX_DURATION:
        raise InvalidArgument(f"{what} {value!r} is longer than a duration may be: at most 1000 years "
                              f"(365250d, {MAX_DURATION:.0f} seconds)")
    return seconds


def _text_seconds(text: str) -> float | None:
    """Seconds of a duration's text ("1h30m"), or None where it is not one."""
    pos, seconds = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return seconds if text and pos == len(text) else None


def parse_rate(value: Rate, what: str = "rate") -> tuple[int, float]:
    """Return ``(count, period_seconds)``; raise InvalidArgument naming the bad value."""
    if isinstance(value, tuple) and len(value) == 2:
        count, period = value
        if isinstance(count, bool) or not isinstance(count, int):
            raise InvalidArgument(f"{what} {value!r}: the count must be an int")
        period_s = parse_duration(period, what)
    elif isinstance(value, str) and (match := _RATE.fullmatch(value)):
        count = int(match.group(1))
        period_s = float(match.group(2) or 1) * _UNITS[match.group(3)]
    else:
        raise InvalidArgument(f"{what} {value!r} is not a rate such as '100/s', '600/m' or (5, '1s')")
    if count < 1 or period_s <= 0:
        raise InvalidArgument(f"{what} {value!r} must allow at least one start in a positive period")
    if period_s > MAX_DURATION:
        raise InvalidArgument(f"{what} {value!r}: its period is longer than a duration may be (1000 years)")
    return count, period_s
