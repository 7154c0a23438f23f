"""Repeat rules: ``cron(text, zone=)`` and ``every(duration)``, and their next time.

A rule is kept in the store as JSON text (``stored()``) and read back with
``from_stored``. ``next_after(t)`` is the rule's first time strictly after
the UNIX time ``t``.

Cron text has five fields (minute hour day-of-month month day-of-week) or a
shorthand (``@daily``), read as local wall times in a named IANA zone. Where
the zone's clocks change:

- a skipped local time (clocks go forward) runs at the first instant after
  the gap, and several skipped times of one gap run once there;
- a repeated local time (clocks go back) runs once, at its first occurrence,
  except in a rule whose hour field covers all 24 hours: that rule runs in
  each real hour, so ``30 * * * *`` runs at both 01:30s of a repeated hour.

``every(d)`` runs at every multiple of ``d`` seconds since the UNIX epoch.

``next_after`` is called once per settled run of a repeating job, so it
walks only the days a rule matches (skipping the months that do not), and
on a day the zone's offset holds finds the first time by arithmetic; only
on a day its clocks change does it look up each wall time in the zone.
"""

from __future__ import annotations

import calendar
import functools
import json
import math
from bisect import bisect_left, bisect_right
from datetime import date, datetime, timedelta
from typing import Callable, Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ._durations import Duration, parse_duration
from ._errors import InvalidArgument

_ONE_DAY = timedelta(days=1)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()

_SHORTHANDS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_MONTHS = {name: number for number, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_DAYS = {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# name, lowest value, highest value, names the field also takes
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # the most each month can have


class Repeat:
    """A repeat rule: immutable, hashable, and equal to another rule with the same ``stored()`` text."""

    __slots__ = ("_stored",)
    _stored: str

    def next_after(self, t: float) -> float:
        """The rule's first time strictly after the UNIX time ``t``, in UNIX seconds."""
        raise NotImplementedError

    def stored(self) -> str:
        """The rule as the canonical JSON text the store keeps."""
        return self._stored

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Repeat):
            return NotImplemented
        return self._stored == other._stored

    def __hash__(self) -> int:
        return hash(self._stored)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a {type(self).__name__} rule cannot be changed")

    def __reduce__(self) -> tuple[Callable[[str], Repeat], tuple[str]]:
        # pickle and copy make it again from its text: its attributes cannot be set
        return from_stored, (self._stored,)


class Cron(Repeat):
    """Cron text read as local wall times in a named IANA zone, as ``tinystore.cron(text, zone=)`` makes it.

    ``text`` is the cron text, its fields separated by single spaces; ``zone`` the zone's name.
    """

    __slots__ = ("text", "zone", "_tz", "_minutes", "_hours", "_hour_ends", "_doms", "_dom_list", "_months",
                 "_dows", "_either_day", "_every_hour")
    text: str
    zone: str | None
    _tz: ZoneInfo
    _minutes: tuple[int, ...]
    _hours: tuple[int, ...]
    _hour_ends: tuple[int, ...]
    _doms: tuple[bool, ...]
    _dom_list: tuple[int, ...]
    _months: tuple[bool, ...]
    _dows: tuple[bool, ...]
    _either_day: bool
    _every_hour: bool

    def __init__(self, text: str, zone: str | None = None):
        if not isinstance(text, str):
            raise InvalidArgument(f"cron text must be a str such as '10 3 * * *', not {type(text).__name__} {text!r}")
        normal = " ".join(text.split())
        if normal.startswith("@") and normal.lower() not in _SHORTHANDS:
            raise InvalidArgument(f"cron text {text!r} is not a shorthand: they are " + ", ".join(_SHORTHANDS))
        fields = _SHORTHANDS.get(normal.lower(), normal).split(" ")
        if len(fields) != 5:
            raise InvalidArgument(f"cron text {text!r} has {len(fields) if normal else 0} fields; it needs 5: "
                                  "minute hour day-of-month month day-of-week (or a shorthand such as '@daily')")
        minutes, hours, doms, months, dows = (_field(part, spec, text) for part, spec in zip(fields, _FIELDS))
        dows = {day % 7 for day in dows}  # 7 is Sunday too
        # As Vixie cron has it: where both day fields are restricted, a day matches either.
        either_day = not fields[2].startswith("*") and not fields[4].startswith("*")
        if not either_day and min(doms) > max(_MONTH_DAYS[month] for month in months):
            names = [calendar.month_name[month] for month in sorted(months)]
            named = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            raise InvalidArgument(f"cron text {text!r} can never match: {named} "
                                  f"{'has' if len(names) == 1 else 'have'} at most "
                                  f"{max(_MONTH_DAYS[month] for month in months)} days")
        set_ = object.__setattr__
        set_(self, "text", normal)
        set_(self, "_tz", _zone(zone, text))
        set_(self, "zone", zone)
        set_(self, "_minutes", tuple(sorted(minutes)))
        set_(self, "_hours", tuple(sorted(hours)))
        # the second of the day of each hour's last minute, to skip an hour in one look
        set_(self, "_hour_ends", tuple(hour * 3600 + self._minutes[-1] * 60 for hour in self._hours))
        set_(self, "_doms", tuple(day in doms for day in range(32)))
        set_(self, "_dom_list", tuple(sorted(doms)) if not either_day else tuple(range(1, 32)))
        set_(self, "_months", tuple(month in months for month in range(13)))
        set_(self, "_dows", tuple(day in dows for day in range(7)))
        set_(self, "_either_day", either_day)
        set_(self, "_every_hour", len(hours) == 24)
        set_(self, "_stored", json.dumps({"cron": normal, "zone": zone}))

    def __str__(self) -> str:
        return f'cron "{self.text}" in {self.zone}'

    def __repr__(self) -> str:
        return f"tinystore.cron({self.text!r}, zone={self.zone!r})"

    def next_after(self, t: float) -> float:
        """The first local time the cron text matches strictly after the UNIX time ``t``, in UNIX seconds."""
        try:
            day = datetime.fromtimestamp(t, self._tz).date()
        except (OverflowError, ValueError):  # t is past the last day a datetime has
            raise InvalidArgument(f"{self} has no time after {t} before the year 10000") from None
        # A day before t's local day too: where clocks go back across midnight, its last times come again after t.
        start = day - _ONE_DAY if day > date.min else day
        best = None
        for day in self._days(start):
            if best is not None and min(self._instants(day, self._hours[0], self._minutes[0])) >= best:
                break
            offset = self._steady_offset(day)
            if offset is not None:
                found = self._first_on_steady_day(day, offset, t)
                if found is not None:
                    return found if best is None else min(found, best)
            else:
                found = self._first_on_changing_day(day, t)
                if found is not None and (best is None or found < best):
                    best = found  # a later day may still hold an earlier instant: the next one decides
        if best is None:
            raise InvalidArgument(f"{self} has no time after {t} before the year 10000")
        return best

    def _days(self, start: date) -> Iterator[date]:
        """The days the rule matches, from ``start`` on, to the end of the year 9999."""
        year, month, first = start.year, start.month, start.day
        while year < 10000:
            if self._months[month]:
                weekday, length = calendar.monthrange(year, month)  # weekday of the 1st, Monday 0
                candidates = self._dom_list
                for day in candidates[bisect_left(candidates, first):]:
                    if day > length:
                        break
                    dom, dow = self._doms[day], self._dows[(weekday + day) % 7]  # cron's Sunday is 0
                    if (dom or dow) if self._either_day else (dom and dow):
                        yield date(year, month, day)
            month, first = month + 1, 1
            if month == 13:
                year, month = year + 1, 1

    def _steady_offset(self, day: date) -> int | None:
        """The zone's UTC offset in seconds at every minute of ``day``, or None where it changes on that day."""
        start = datetime(day.year, day.month, day.day, tzinfo=self._tz)
        end = start.replace(hour=23, minute=59)  # the day's last minute: is it repeated, or after a change?
        offset = start.utcoffset()
        assert offset is not None  # a ZoneInfo gives every datetime an offset
        if offset == start.replace(fold=1).utcoffset() == end.utcoffset() == end.replace(fold=1).utcoffset():
            return int(offset.total_seconds())
        return None

    def _first_on_steady_day(self, day: date, offset: int, t: float) -> float | None:
        """The first time of the rule on ``day`` after ``t``, where every wall time of the day is one instant."""
        base = (day.toordinal() - _EPOCH_ORDINAL) * 86400 - offset  # the day's midnight
        second = t - base  # exact: both are within a day of each other
        index = bisect_right(self._hour_ends, second)
        if index == len(self._hours):
            return None
        hour = self._hours[index]
        minute = self._minutes[bisect_right(self._minutes, (second - hour * 3600) / 60)]
        return float(base + hour * 3600 + minute * 60)

    def _first_on_changing_day(self, day: date, t: float) -> float | None:
        """The first time of the rule on ``day`` after ``t``, on a day the zone's clocks change."""
        best = gap_end = None
        for hour in self._hours:
            if max(self._instants(day, hour, self._minutes[-1])) <= t:
                continue
            if best is not None and min(self._instants(day, hour, self._minutes[0])) >= best:
                break  # no later wall time can be an earlier instant
            for minute in self._minutes:
                first, second = self._instants(day, hour, minute)
                if first > second:  # skipped: the gap's end lies in (second, first]
                    if gap_end is None or not second < gap_end <= first:
                        gap_end = self._gap_end(datetime(day.year, day.month, day.day, hour, minute), second, first)
                    runs: tuple[float, ...] = (gap_end,)
                elif first < second and self._every_hour:  # repeated, in a rule that runs every real hour
                    runs = (first, second)
                else:
                    runs = (first,)
                for run in runs:
                    if run > t and (best is None or run < best):
                        best = run
        return best

    def _instants(self, day: date, hour: int, minute: int) -> tuple[float, float]:
        """The wall time's instant at its first and its second occurrence (equal where it occurs once;
        reversed where it is skipped: the instants it would have by the offsets before and after)."""
        wall = datetime(day.year, day.month, day.day, hour, minute, tzinfo=self._tz)
        return wall.timestamp(), wall.replace(fold=1).timestamp()

    def _gap_end(self, wall: datetime, before: float, after: float) -> float:
        """The first instant after the gap that skips the naive ``wall`` time, found between ``before``, whose
        local time comes before the gap, and ``after``, whose local time is past it. Offsets and the instants
        they change at are whole seconds."""
        low, high = int(before), int(after)
        while high - low > 1:
            middle = (low + high) // 2
            if datetime.fromtimestamp(middle, self._tz).replace(tzinfo=None) >= wall:
                high = middle
            else:
                low = middle
        return float(high)


class Every(Repeat):
    """Every multiple of ``seconds`` since the UNIX epoch, as ``tinystore.every(duration)`` makes it."""

    __slots__ = ("seconds",)
    seconds: float

    def __init__(self, duration: Duration):
        if isinstance(duration, (int, float, timedelta)) and not isinstance(duration, bool):
            value = duration.total_seconds() if isinstance(duration, timedelta) else duration
            if value <= 0:
                raise InvalidArgument(f"every {duration!r} must be a positive duration")
        seconds = parse_duration(duration, "every")
        if seconds == 0:
            raise InvalidArgument(f"every {duration!r} must be a positive duration")
        if seconds < 1:
            raise InvalidArgument(f"every {duration!r} is under 1 second: a job repeats at most once a second")
        object.__setattr__(self, "seconds", seconds)
        object.__setattr__(self, "_stored", json.dumps({"every": int(seconds) if seconds.is_integer() else seconds}))

    def __str__(self) -> str:
        return f"every {_duration_text(self.seconds)}"

    def __repr__(self) -> str:
        return f"tinystore.every({json.loads(self._stored)['every']!r})"

    def next_after(self, t: float) -> float:
        """The first multiple of ``seconds`` strictly after the UNIX time ``t``."""
        size = self.seconds
        count = math.floor(t / size) + 1
        # t / size is rounded: step to the first multiple past t, which is at most one away.
        while count * size <= t:
            count += 1
        while (count - 1) * size > t:
            count -= 1
        return count * size


def cron(text: str, zone: str | None = None) -> Cron:
    """A rule that runs at the times of the cron ``text``, read as wall times in ``zone``, an IANA zone name
    such as ``"Europe/Berlin"`` or ``"UTC"`` (required); see the module's docstring for daylight saving."""
    return Cron(text, zone)


def every(duration: Duration) -> Every:
    """A rule that runs at every multiple of ``duration`` (``"15m"``, 900, a timedelta; 1 second or more)
    since the UNIX epoch: ``every("15m")`` runs at :00, :15, :30 and :45 UTC."""
    return Every(duration)


@functools.lru_cache(maxsize=4096)
def from_stored(text: str) -> Repeat:
    """The rule whose ``stored()`` text is ``text``; InvalidArgument (a ValueError) where it is damaged."""
    try:
        rule = json.loads(text)
    except (TypeError, ValueError):
        rule = None
    try:
        if isinstance(rule, dict) and rule.keys() == {"every"}:
            return Every(rule["every"])
        if isinstance(rule, dict) and rule.keys() == {"cron", "zone"}:
            return Cron(rule["cron"], rule["zone"])
    except InvalidArgument as error:
        raise InvalidArgument(f"stored repeat rule {text!r} is damaged: {error}") from None
    raise InvalidArgument(f"stored repeat rule {text!r} is damaged: it is neither "
                          '{"cron": text, "zone": name} nor {"every": seconds}')


def _zone(zone: object, text: str) -> ZoneInfo:
    if zone is None:
        raise InvalidArgument(f"cron text {text!r} needs a zone: an IANA zone name such as 'Europe/Berlin' or 'UTC'")
    if not isinstance(zone, str):
        raise InvalidArgument(f"the zone of cron text {text!r} must be an IANA zone name such as 'Europe/Berlin' "
                              f"or 'UTC', not {type(zone).__name__} {zone!r}")
    if zone == "localtime":  # a file some systems keep beside the zones: this machine's zone, whatever it is
        raise InvalidArgument(f"the zone of cron text {text!r} must be a named IANA zone, not 'localtime'")
    try:
        return ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(f"the zone {zone!r} of cron text {text!r} is not a known IANA zone name") from None


def _field(part: str, spec: tuple[str, int, int, dict[str, int]], text: str) -> set[int]:
    """The values one field of cron ``text`` takes; ``spec`` is its line in _FIELDS."""
    name, low, high, names = spec
    values: set[int] = set()
    for item in part.split(","):
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit() and int(step_text) > 0):
                raise InvalidArgument(f"cron field {name!r} step in {item!r} must be a whole number, 1 or more, "
                                      f"in {text!r}")
            step = int(step_text)
        if base == "*":
            first, last = low, high
        elif "-" in base:
            start, _, end = base.partition("-")
            first = _value(start, name, item, text, names, low, high)
            last = _value(end, name, item, text, names, low, high)
            if names is _DAYS and end.lower() == "sun" and first > 0:
                last = 7  # "fri-sun" ends the week with its Sunday
            if first > last:
                raise InvalidArgument(f"cron field {name!r} range {base!r} runs backwards in {text!r}: "
                                      "write the lower value first")
        else:
            first = _value(base, name, item, text, names, low, high)
            last = high if slash else first  # "a/n" runs from a to the field's highest value
        values.update(range(first, last + 1, step))
    return values


def _value(word: str, name: str, item: str, text: str, names: dict[str, int], low: int, high: int) -> int:
    if word.lower() in names:
        return names[word.lower()]
    if not (word.isascii() and word.isdigit()):
        kind = {"month": " or a month name (jan..dec)", "day-of-week": " or a day name (sun..sat)"}.get(name, "")
        if word == item:
            raise InvalidArgument(f"cron field {name!r} item {item!r} is not a number{kind}, "
                                  f"a range a-b or a step */n in {text!r}")
        raise InvalidArgument(f"cron field {name!r} value {word!r} in {item!r} is not a number{kind} in {text!r}")
    value = int(word)
    if not low <= value <= high:
        raise InvalidArgument(f"cron field {name!r} value {value} is out of {low}-{high} in {text!r}")
    return value


def _duration_text(seconds: float) -> str:
    """``seconds`` as people read a duration: 900 as "15m", 5400 as "1h30m"."""
    parts, rest = [], seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{int(count)}{unit}")
    if rest or not parts:
        parts.append(f"{rest:.3f}".rstrip("0").rstrip(".") + "s")
    return "".join(parts)
