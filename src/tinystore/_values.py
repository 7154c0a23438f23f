"""Checks and encodings of what users hand in: names, ids, payloads, times.

A job's time is a number of UNIX seconds within years 1 to 9999 UTC, the
range ``datetime`` can show: ``at=`` and ``delay=`` outside it are refused
before anything is written, and a time outside it in a row (written by an
earlier version, or damaged) reads as the nearest end of the range.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from datetime import datetime, timezone
from typing import Any

from ._errors import InvalidArgument, LimitExceeded

MAX_JSON = 1024 * 1024
MAX_PROGRESS = 4 * 1024
MAX_ID = 1024
MAX_BATCH = 10_000  # jobs per add_many: one transaction holds the write lock while it writes them
PRIORITIES = range(-100, 101)  # Django's Task.priority has the same range
QUEUE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
FIRST_TIME = datetime(1, 1, 1, tzinfo=timezone.utc)
LAST_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc)
MIN_TIME = FIRST_TIME.timestamp()  # -62135596800.0
MAX_TIME = LAST_TIME.timestamp()  # 253402300799.0
TIME_RANGE = "years 1 to 9999 UTC"


def check_queue_name(name: object) -> str:
    if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
        raise InvalidArgument(
            f"queue name {name!r} must match [a-z0-9][a-z0-9_-]{{0,63}}: "
            "lower-case letters, digits, '_' and '-', at most 64"
        )
    return name


def check_text_id(value: object, what: str, queue: str, job_id: str | None = None) -> str:
    """An id or a group: 1 to 1024 bytes of UTF-8 text."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a str, not {type(value).__name__} {value!r}", queue=queue, job_id=job_id)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what} {value!r} is not valid UTF-8 text", queue=queue, job_id=job_id) from None
    if not 1 <= size <= MAX_ID:
        raise LimitExceeded(f"{what} must be 1 to {MAX_ID} bytes of UTF-8, not {size}", queue=queue, job_id=job_id)
    return value


def _plain(value: Any) -> Any:
    """Turn dataclasses and pydantic models into plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON")


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_plain)


def encode_json(value: Any, what: str, queue: str, job_id: str | None = None, limit: int = MAX_JSON) -> str:
    """Compact JSON text of ``value``, or InvalidArgument / LimitExceeded saying why not."""
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{what} is not JSON: {exc}", queue=queue, job_id=job_id) from None
    except RecursionError:
        raise InvalidArgument(f"{what} is nested too deeply to be JSON", queue=queue, job_id=job_id) from None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800"): no UTF-8 text can hold it
        bad = exc.object[exc.start:exc.end]
        raise InvalidArgument(f"{what} is not JSON that UTF-8 can hold: it has {bad!r}, a lone surrogate, "
                              f"at character {exc.start} of its JSON text", queue=queue, job_id=job_id) from None
    if size > limit:
        raise LimitExceeded(f"{what} is {size} bytes of JSON, over the limit of {limit}", queue=queue, job_id=job_id)
    return text


def to_timestamp(at: object, queue: str, job_id: str | None = None) -> float:
    """``at=`` as UNIX seconds: an aware datetime or a number within years 1 to 9999 UTC; naive
    datetimes are refused."""
    if isinstance(at, datetime):
        if at.tzinfo is None or at.utcoffset() is None:
            raise InvalidArgument(f"at={at!r} is a naive datetime; give it a timezone", queue=queue, job_id=job_id)
        try:
            seconds = at.timestamp()
        except (OverflowError, ValueError):  # year 1 or 9999 moved out of range by its offset
            seconds = math.nan
    elif isinstance(at, (int, float)) and not isinstance(at, bool):
        try:
            seconds = float(at)
        except OverflowError:  # an int too large for a float
            seconds = math.nan
    else:
        raise InvalidArgument(f"at={at!r} must be an aware datetime or UNIX seconds", queue=queue, job_id=job_id)
    return check_time(seconds, f"at={at!r}", queue, job_id)


def check_time(seconds: float, what: str, queue: str, job_id: str | None = None) -> float:
    """``seconds`` where it is a job's time (UNIX seconds within years 1 to 9999 UTC); else InvalidArgument."""
    if not MIN_TIME <= seconds <= MAX_TIME:  # NaN too
        raise InvalidArgument(f"{what} is not a time a job can have: it must fall within {TIME_RANGE} "
                              f"(UNIX seconds {MIN_TIME:.0f} to {MAX_TIME:.0f})", queue=queue, job_id=job_id)
    return seconds


def check_priority(value: object, queue: str, job_id: str | None = None) -> int:
    """A job's priority: an int from -100 to 100 (a bool is not one); else InvalidArgument."""
    if not isinstance(value, int) or isinstance(value, bool) or value not in PRIORITIES:
        raise InvalidArgument(f"priority={value!r} must be an int from -100 to 100", queue=queue, job_id=job_id)
    return int(value)


def from_timestamp(ts: float) -> datetime:
    """A stored time as an aware UTC datetime; one outside years 1 to 9999 (a row written by an earlier
    version, or damaged) reads as the nearest end of that range, so that reading it never raises."""
    try:
        if MIN_TIME <= ts <= MAX_TIME:
            return datetime.fromtimestamp(ts, tz=timezone.utc)
        return LAST_TIME if ts > MAX_TIME else FIRST_TIME  # NaN as the first
    except (TypeError, ValueError, OverflowError, OSError):  # not a number at all: a damaged row
        return FIRST_TIME


def new_id(now: float) -> str:
    """An id that tinystore makes (a job's, a batch's): milliseconds since the epoch, then 80 random bits
    (32 hex digits, sorting by time)."""
    return f"{int(now * 1000):012x}{random.getrandbits(80):020x}"  # unique, not secret
