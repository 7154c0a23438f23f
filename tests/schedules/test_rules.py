"""Repeat rules on their own (SPEC §8): cron text in a zone, every a duration, their next times and stored text.

Times are compared as aware UTC datetimes; a comment gives the local time where it helps.
"""

from __future__ import annotations

import copy
import math
import pickle
from datetime import datetime, timedelta, timezone
from typing import Callable
from zoneinfo import ZoneInfo

import pytest

from tinystore._errors import InvalidArgument
from tinystore._repeat import Cron, Every, Repeat, cron, every, from_stored


def utc(*fields: int) -> datetime:
    return datetime(*fields, tzinfo=timezone.utc)


def local(zone: str, *fields: int, fold: int = 0) -> float:
    """The UNIX time of a local wall time in ``zone`` (its second occurrence with ``fold=1``)."""
    return datetime(*fields, tzinfo=ZoneInfo(zone), fold=fold).timestamp()


def runs(rule: Repeat, after: float | datetime, count: int) -> list[datetime]:
    """The rule's next ``count`` times after ``after``, as aware UTC datetimes."""
    t = after.timestamp() if isinstance(after, datetime) else after
    times = []
    for _ in range(count):
        t = rule.next_after(t)
        times.append(datetime.fromtimestamp(t, timezone.utc))
    return times


# Cron fields


def test_a_star_in_every_field_runs_every_minute():
    rule = cron("* * * * *", zone="UTC")
    assert runs(rule, utc(2026, 12, 1, 10, 7, 30), 3) == [utc(2026, 12, 1, 10, 8), utc(2026, 12, 1, 10, 9),
                                                          utc(2026, 12, 1, 10, 10)]


def test_the_next_time_is_strictly_after_the_given_time():
    rule = cron("0 8 * * *", zone="UTC")
    assert runs(rule, utc(2026, 12, 1, 8, 0), 1) == [utc(2026, 12, 2, 8, 0)]
    assert runs(rule, utc(2026, 12, 1, 7, 59, 59, 999999), 1) == [utc(2026, 12, 1, 8, 0)]


def test_a_range_runs_at_each_value_from_its_first_to_its_last():
    rule = cron("0 9-11 * * *", zone="UTC")
    assert runs(rule, utc(2026, 12, 1, 9, 30), 4) == [utc(2026, 12, 1, 10), utc(2026, 12, 1, 11),
                                                      utc(2026, 12, 2, 9), utc(2026, 12, 2, 10)]


def test_a_step_of_a_star_runs_at_every_nth_value_from_the_fields_lowest():
    rule = cron("*/20 */6 * * *", zone="UTC")
    assert runs(rule, utc(2026, 12, 1, 5, 0), 5) == [utc(2026, 12, 1, 6, 0), utc(2026, 12, 1, 6, 20),
                                                     utc(2026, 12, 1, 6, 40), utc(2026, 12, 1, 12, 0),
                                                     utc(2026, 12, 1, 12, 20)]


def test_a_step_of_a_range_stays_in_the_range():
    rule = cron("10-30/10 7 * * *", zone="UTC")
    assert runs(rule, utc(2026, 12, 1), 4) == [utc(2026, 12, 1, 7, 10), utc(2026, 12, 1, 7, 20),
                                               utc(2026, 12, 1, 7, 30), utc(2026, 12, 2, 7, 10)]


def test_a_step_of_one_value_runs_from_it_to_the_fields_highest():
    rule = cron("50/5 * * * *", zone="UTC")
    assert runs(rule, utc(2026, 12, 1, 7, 0), 3) == [utc(2026, 12, 1, 7, 50), utc(2026, 12, 1, 7, 55),
                                                     utc(2026, 12, 1, 8, 50)]


def test_a_list_runs_at_each_of_its_values_and_ranges():
    rule = cron("5,10-12 8 * * *", zone="UTC")
    assert runs(rule, utc(2026, 12, 1), 5) == [utc(2026, 12, 1, 8, 5), utc(2026, 12, 1, 8, 10),
                                               utc(2026, 12, 1, 8, 11), utc(2026, 12, 1, 8, 12),
                                               utc(2026, 12, 2, 8, 5)]


def test_month_names_in_lists_and_ranges_any_case():
    assert runs(cron("0 0 1 JAN,jul *", zone="UTC"), utc(2026, 2, 1), 3) == [
        utc(2026, 7, 1), utc(2027, 1, 1), utc(2027, 7, 1)]
    assert runs(cron("0 0 1 Jun-aug *", zone="UTC"), utc(2026, 1, 1), 4) == [
        utc(2026, 6, 1), utc(2026, 7, 1), utc(2026, 8, 1), utc(2027, 6, 1)]


def test_day_names_in_ranges_any_case():
    # 2026-12-04 is a Friday
    rule = cron("0 12 * * MON-Fri", zone="UTC")
    assert runs(rule, utc(2026, 12, 4, 13), 3) == [utc(2026, 12, 7, 12), utc(2026, 12, 8, 12), utc(2026, 12, 9, 12)]


def test_a_day_name_range_may_end_on_sunday():
    rule = cron("0 12 * * fri-sun", zone="UTC")
    assert runs(rule, utc(2026, 12, 1), 4) == [utc(2026, 12, 4, 12), utc(2026, 12, 5, 12), utc(2026, 12, 6, 12),
                                               utc(2026, 12, 11, 12)]


@pytest.mark.parametrize("sunday", ["0", "7", "sun", "SUN"])
def test_day_of_week_0_7_and_sun_are_all_sunday(sunday):
    # 2026-12-06 and 2026-12-13 are Sundays
    rule = cron(f"0 0 * * {sunday}", zone="UTC")
    assert runs(rule, utc(2026, 12, 1), 2) == [utc(2026, 12, 6), utc(2026, 12, 13)]


def test_a_day_of_week_range_may_end_on_7():
    rule = cron("0 0 * * 6-7", zone="UTC")
    assert runs(rule, utc(2026, 12, 1), 3) == [utc(2026, 12, 5), utc(2026, 12, 6), utc(2026, 12, 12)]


@pytest.mark.parametrize("shorthand, fields", [
    ("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"), ("@weekly", "0 0 * * 0"),
    ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"), ("@DAILY", "0 0 * * *"),
])
def test_a_shorthand_runs_as_its_five_fields(shorthand, fields):
    start = utc(2026, 12, 1, 10, 30)
    assert runs(cron(shorthand, zone="Europe/Berlin"), start, 4) == runs(cron(fields, zone="Europe/Berlin"), start, 4)


def test_the_shorthands_first_times():
    start = utc(2026, 12, 1, 10, 30)  # a Tuesday
    assert runs(cron("@hourly", zone="UTC"), start, 1) == [utc(2026, 12, 1, 11)]
    assert runs(cron("@daily", zone="UTC"), start, 1) == [utc(2026, 12, 2)]
    assert runs(cron("@weekly", zone="UTC"), start, 1) == [utc(2026, 12, 6)]
    assert runs(cron("@monthly", zone="UTC"), start, 1) == [utc(2027, 1, 1)]
    assert runs(cron("@yearly", zone="UTC"), start, 1) == [utc(2027, 1, 1)]


def test_where_both_day_fields_are_restricted_a_day_matching_either_runs():
    # the 13th, and every Friday: 2026-11-06, 13 (both), 20, 27, then 2026-12-04, 11, 13 (a Sunday)
    rule = cron("0 0 13 * fri", zone="UTC")
    assert runs(rule, utc(2026, 11, 1), 7) == [utc(2026, 11, 6), utc(2026, 11, 13), utc(2026, 11, 20),
                                               utc(2026, 11, 27), utc(2026, 12, 4), utc(2026, 12, 11),
                                               utc(2026, 12, 13)]


def test_where_one_day_field_starts_with_a_star_a_day_must_match_both():
    # the days 1, 11, 21 and 31 that are Mondays
    rule = cron("0 0 */10 * mon", zone="UTC")
    assert runs(rule, utc(2026, 5, 1), 4) == [utc(2026, 5, 11), utc(2026, 6, 1), utc(2026, 8, 31), utc(2026, 9, 21)]
    rule = cron("0 0 13 * */7", zone="UTC")  # a day-of-week of 0 and 7: the 13ths that are Sundays
    assert runs(rule, utc(2026, 1, 1), 2) == [utc(2026, 9, 13), utc(2026, 12, 13)]


def test_a_day_of_month_with_a_star_day_of_week_runs_on_that_day_only():
    rule = cron("0 0 13 * *", zone="UTC")
    assert runs(rule, utc(2026, 11, 1), 2) == [utc(2026, 11, 13), utc(2026, 12, 13)]


# Calendar edges


def test_the_31st_skips_the_months_that_have_no_31st():
    rule = cron("0 0 31 * *", zone="UTC")
    assert runs(rule, utc(2026, 1, 1), 4) == [utc(2026, 1, 31), utc(2026, 3, 31), utc(2026, 5, 31), utc(2026, 7, 31)]


def test_the_30th_of_february_or_april_runs_in_april_only():
    rule = cron("0 0 30 feb,apr *", zone="UTC")
    assert runs(rule, utc(2026, 1, 1), 2) == [utc(2026, 4, 30), utc(2027, 4, 30)]


def test_the_29th_of_february_runs_in_leap_years():
    rule = cron("0 0 29 feb *", zone="UTC")
    assert runs(rule, utc(2026, 12, 1), 3) == [utc(2028, 2, 29), utc(2032, 2, 29), utc(2036, 2, 29)]


def test_the_29th_of_february_is_found_8_years_ahead_over_a_century_that_is_not_a_leap_year():
    rule = cron("0 0 29 feb *", zone="UTC")
    assert runs(rule, utc(2096, 2, 29), 1) == [utc(2104, 2, 29)]


def test_the_29th_of_february_on_a_sunday_is_found_decades_ahead():
    # both day fields restricted would be either; "*/7" starts with a star, so the day must be both
    rule = cron("0 0 29 feb */7", zone="UTC")
    assert runs(rule, utc(2004, 3, 1), 2) == [utc(2032, 2, 29), utc(2060, 2, 29)]


def test_the_last_minute_of_a_year_is_followed_by_the_first_of_the_next():
    assert runs(cron("0 0 1 1 *", zone="UTC"), utc(2026, 12, 31, 23, 59, 59), 1) == [utc(2027, 1, 1)]
    assert runs(cron("59 23 31 12 *", zone="UTC"), utc(2026, 12, 31, 23, 59), 1) == [utc(2027, 12, 31, 23, 59)]
    assert runs(cron("* * * * *", zone="UTC"), utc(2026, 12, 31, 23, 59), 1) == [utc(2027, 1, 1)]


def test_the_last_times_a_datetime_has_are_found():
    assert runs(cron("59 23 31 12 *", zone="UTC"), utc(9999, 12, 31), 1) == [utc(9999, 12, 31, 23, 59)]
    # 23:59 on 9999-12-31 in Midway (UTC-11) is in the year 10000 in UTC
    assert cron("59 23 31 12 *", zone="Pacific/Midway").next_after(utc(9999, 12, 31).timestamp()) == (
        utc(9999, 12, 31, 23, 59).timestamp() + 11 * 3600)


@pytest.mark.parametrize("text, zone, after", [
    ("0 0 29 feb *", "UTC", utc(9996, 3, 1)),
    ("59 23 31 12 *", "Pacific/Kiritimati", utc(9999, 12, 31, 10)),  # UTC+14: already its last minute
    ("* * * * *", "Pacific/Kiritimati", utc(9999, 12, 31, 23, 59, 59)),  # its local time is in the year 10000
])
def test_a_rule_with_no_time_left_before_the_year_10000_says_so(text, zone, after):
    with pytest.raises(InvalidArgument, match=rf"cron .* in {zone} has no time after .* before the year 10000"):
        cron(text, zone=zone).next_after(after.timestamp())


def test_times_are_local_wall_times_in_the_zone():
    # Moscow is UTC+3 all year: 03:10 there is 00:10 UTC
    rule = cron("10 3 * * *", zone="Europe/Moscow")
    assert runs(rule, utc(2026, 12, 1), 2) == [utc(2026, 12, 1, 0, 10), utc(2026, 12, 2, 0, 10)]
    # 2026-12-07 is a Monday; Berlin is UTC+1 in winter
    rule = cron("0 8 * * mon", zone="Europe/Berlin")
    assert runs(rule, utc(2026, 12, 1), 2) == [utc(2026, 12, 7, 7), utc(2026, 12, 14, 7)]


def test_a_local_day_starts_at_the_zones_midnight():
    # 23:30 UTC on Sunday 2026-12-06 is already Monday in Tokyo (UTC+9)
    rule = cron("0 0 * * mon", zone="Asia/Tokyo")
    assert runs(rule, utc(2026, 12, 6, 14, 59), 1) == [utc(2026, 12, 6, 15)]


# Daylight saving: New York goes forward at 2026-03-08 02:00 and back at 2026-11-01 02:00;
# Berlin forward at 2026-03-29 02:00 and back at 2026-10-25 03:00; Sydney back at 2026-04-05 03:00
# and forward at 2026-10-04 02:00 (local times before each change).


@pytest.mark.parametrize("zone, expected", [
    # 02:30 EST the day before, 03:00 EDT (02:30 is skipped), 02:30 EDT the day after
    ("America/New_York", [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]),
    # 02:30 CET the day before, 03:00 CEST (02:30 is skipped), 02:30 CEST the day after
    ("Europe/Berlin", [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]),
])
def test_a_skipped_local_time_runs_at_the_first_instant_after_the_gap(zone, expected):
    rule = cron("30 2 * * *", zone=zone)
    assert runs(rule, expected[0] - timedelta(hours=1), 3) == expected


@pytest.mark.parametrize("zone, day, expected", [
    # 03:00 EDT once, then 02:00 and 02:15 EDT the next day
    ("America/New_York", (2026, 3, 8), [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6), utc(2026, 3, 9, 6, 15)]),
    # 03:00 CEST once, then 02:00 and 02:15 CEST the next day
    ("Europe/Berlin", (2026, 3, 29), [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0), utc(2026, 3, 30, 0, 15)]),
])
def test_several_skipped_times_of_one_gap_run_once_at_its_end(zone, day, expected):
    rule = cron("*/15 2 * * *", zone=zone)
    assert runs(rule, local(zone, *day, 1, 0), 3) == expected


def test_a_rule_of_every_hour_runs_at_the_gap_end_and_goes_on_after_it():
    rule = cron("30 * * * *", zone="America/New_York")
    # 01:30 EST, then 02:30 does not exist: 03:00 EDT, then 03:30 EDT
    assert runs(rule, local("America/New_York", 2026, 3, 8, 1, 0), 3) == [
        utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7, 0), utc(2026, 3, 8, 7, 30)]


def test_a_gap_end_runs_once_even_when_asked_from_inside_the_gap():
    rule = cron("*/15 2 * * *", zone="America/New_York")
    assert rule.next_after(utc(2026, 3, 8, 6, 59, 59).timestamp()) == utc(2026, 3, 8, 7).timestamp()
    assert rule.next_after(utc(2026, 3, 8, 7).timestamp()) == utc(2026, 3, 9, 6).timestamp()  # 02:00 EDT


@pytest.mark.parametrize("zone, text, day, first, next_day", [
    # 01:30 EDT (not 01:30 EST), then 01:30 EST the next day
    ("America/New_York", "30 1 * * *", (2026, 11, 1), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)),
    # 02:30 CEST (not 02:30 CET), then 02:30 CET the next day
    ("Europe/Berlin", "30 2 * * *", (2026, 10, 25), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)),
])
def test_a_repeated_local_time_runs_once_at_its_first_occurrence(zone, text, day, first, next_day):
    rule = cron(text, zone=zone)
    assert runs(rule, local(zone, *day, 0, 0), 2) == [first, next_day]


@pytest.mark.parametrize("zone, text, day, hour, expected", [
    # from 01:10 EST: 01:30 EST the next day
    ("America/New_York", "30 1 * * *", (2026, 11, 1), 1, utc(2026, 11, 2, 6, 30)),
    # from 02:10 CET: 02:30 CET the next day
    ("Europe/Berlin", "30 2 * * *", (2026, 10, 25), 2, utc(2026, 10, 26, 1, 30)),
])
def test_a_repeated_local_time_asked_from_its_second_occurrence_waits_for_the_next_day(zone, text, day, hour,
                                                                                        expected):
    rule = cron(text, zone=zone)
    assert runs(rule, local(zone, *day, hour, 10, fold=1), 1) == [expected]


@pytest.mark.parametrize("zone, day, hour, expected", [
    # 00:30 EDT, 01:30 EDT, 01:30 EST, 02:30 EST
    ("America/New_York", (2026, 11, 1), 0, [utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 5, 30),
                                            utc(2026, 11, 1, 6, 30), utc(2026, 11, 1, 7, 30)]),
    # 01:30 CEST, 02:30 CEST, 02:30 CET, 03:30 CET
    ("Europe/Berlin", (2026, 10, 25), 1, [utc(2026, 10, 24, 23, 30), utc(2026, 10, 25, 0, 30),
                                          utc(2026, 10, 25, 1, 30), utc(2026, 10, 25, 2, 30)]),
])
def test_a_rule_of_every_hour_runs_in_both_real_hours_of_a_repeated_hour(zone, day, hour, expected):
    rule = cron("30 * * * *", zone=zone)
    assert runs(rule, local(zone, *day, hour, 0), 4) == expected


def test_in_a_repeated_hour_an_earlier_minute_of_its_second_occurrence_comes_after_a_later_one_of_its_first():
    rule = cron("15,45 * * * *", zone="America/New_York")
    # from 01:20 EDT: 01:45 EDT, 01:15 EST, 01:45 EST, 02:15 EST
    assert runs(rule, local("America/New_York", 2026, 11, 1, 1, 20), 4) == [
        utc(2026, 11, 1, 5, 45), utc(2026, 11, 1, 6, 15), utc(2026, 11, 1, 6, 45), utc(2026, 11, 1, 7, 15)]


def test_a_repeated_time_that_crosses_midnight_runs_again_on_the_day_before():
    # St. John's went back from 2010-11-07 00:01 NDT to 2010-11-06 23:01 NST
    after = utc(2010, 11, 7, 2, 30, 30)  # 00:00:30 NDT on the 7th
    # 23:30 NST on the 6th, then 00:30 NST on the 7th
    assert runs(cron("30 * * * *", zone="America/St_Johns"), after, 2) == [utc(2010, 11, 7, 3), utc(2010, 11, 7, 4)]
    # 23:30 ran at its first occurrence (NDT): next is 23:30 NST on the 7th
    assert runs(cron("30 23 * * *", zone="America/St_Johns"), after, 1) == [utc(2010, 11, 8, 3)]


def test_a_southern_hemisphere_zone_changes_its_clocks_in_april_and_october():
    rule = cron("30 2 * * *", zone="Australia/Sydney")
    # back on 2026-04-05: 02:30 AEDT, the first occurrence; then 02:30 AEST
    assert runs(rule, utc(2026, 4, 4, 12), 2) == [utc(2026, 4, 4, 15, 30), utc(2026, 4, 5, 16, 30)]
    # forward on 2026-10-04: 02:30 is skipped, 03:00 AEDT; then 02:30 AEDT
    assert runs(rule, utc(2026, 10, 3, 12), 2) == [utc(2026, 10, 3, 16), utc(2026, 10, 4, 15, 30)]


def _changes(zone: str, year: int) -> list[int]:
    """For each change of ``zone``'s UTC offset in ``year``, the first whole half hour (UNIX time) after it."""
    tz, t, end = ZoneInfo(zone), int(utc(year, 1, 1).timestamp()), int(utc(year + 1, 1, 1).timestamp())
    changes, offset = [], datetime.fromtimestamp(t, tz).utcoffset()
    for t in range(t, end, 1800):
        if datetime.fromtimestamp(t, tz).utcoffset() != offset:
            changes.append(t)
            offset = datetime.fromtimestamp(t, tz).utcoffset()
    return changes


def _reference_runs(zone: str, matches: Callable[[datetime], bool], every_hour: bool, start: int,
                    end: int) -> list[int]:
    """A rule's runs from ``start`` to ``end`` found by looking at every UTC minute (the zones below change by
    whole minutes): an instant whose local time matches (at its second occurrence only for a rule that runs
    every hour), and the instant after a gap in which a matching local time was skipped."""
    tz, found = ZoneInfo(zone), []
    previous = datetime.fromtimestamp(start - 60, tz).replace(tzinfo=None)
    for t in range(start, end, 60):
        now = datetime.fromtimestamp(t, tz)
        wall = now.replace(tzinfo=None)
        skipped = (previous + timedelta(minutes=n) for n in range(1, (wall - previous) // timedelta(minutes=1)))
        if (matches(wall) and (now.fold == 0 or every_hour)) or any(map(matches, skipped)):
            found.append(t)
        previous = wall
    return found


REFERENCE_RULES = {
    "30 2 * * *": (lambda w: w.hour == 2 and w.minute == 30, False),
    "*/15 2 * * *": (lambda w: w.hour == 2 and w.minute % 15 == 0, False),
    "30 1 * * *": (lambda w: w.hour == 1 and w.minute == 30, False),
    "45 1-2 * * *": (lambda w: w.hour in (1, 2) and w.minute == 45, False),
    "0 0 * * *": (lambda w: w.hour == 0 and w.minute == 0, False),
    "*/10 23,0 * * *": (lambda w: w.hour in (23, 0) and w.minute % 10 == 0, False),
    "30 * * * *": (lambda w: w.minute == 30, True),
    "15,45 * * * *": (lambda w: w.minute in (15, 45), True),
    "* * * * *": (lambda w: True, True),
}


@pytest.mark.parametrize("text", list(REFERENCE_RULES))
@pytest.mark.parametrize("zone, year", [
    ("America/New_York", 2026), ("Europe/Berlin", 2026), ("Australia/Sydney", 2026),
    ("Australia/Lord_Howe", 2026),  # changes by half an hour
    ("America/Havana", 2026), ("America/Santiago", 2026),  # change at midnight
    ("America/St_Johns", 2010),  # changed at 00:01: going back repeated 23:01 to 00:01, across midnight
    ("Asia/Bishkek", 2004),  # went back from 02:30 to 01:30: a repeated time across an hour's end
])
def test_next_times_around_every_clock_change_of_a_year_are_those_found_minute_by_minute(zone, year, text):
    matches, every_hour = REFERENCE_RULES[text]
    rule = cron(text, zone=zone)
    for change in _changes(zone, year):
        start, end = change - 36 * 3600, change + 36 * 3600
        expected = _reference_runs(zone, matches, every_hour, start, end)
        near = [t for t in expected if abs(t - change) <= 3 * 3600]
        for t in sorted({*range(start, end - 24 * 3600, 7 * 60 + 1), *near, *(t - 0.5 for t in near)}):
            assert rule.next_after(t) == next(run for run in expected if run > t), (zone, text, t)


# every


def test_every_runs_at_the_multiples_of_its_duration_since_the_epoch():
    rule = every("15m")
    assert runs(rule, utc(2026, 12, 1, 10, 7, 30), 4) == [utc(2026, 12, 1, 10, 15), utc(2026, 12, 1, 10, 30),
                                                          utc(2026, 12, 1, 10, 45), utc(2026, 12, 1, 11, 0)]


def test_every_week_runs_on_thursdays_at_midnight_utc_as_the_epoch_began():
    assert runs(every("7d"), utc(2026, 12, 1), 2) == [utc(2026, 12, 3), utc(2026, 12, 10)]


def test_every_next_time_is_strictly_after_a_multiple():
    rule = every(900)
    assert rule.next_after(1_800_000_000.0) == 1_800_000_900.0
    assert rule.next_after(math.nextafter(1_800_000_000.0, 0)) == 1_800_000_000.0
    assert rule.next_after(math.nextafter(1_800_000_000.0, math.inf)) == 1_800_000_900.0


def test_every_works_before_the_epoch():
    assert every("1h").next_after(-1.5) == 0.0
    assert every("1h").next_after(-3600.0) == 0.0
    assert every("1h").next_after(-3600.5) == -3600.0


@pytest.mark.parametrize("duration", [1.1, 3, 7.3, "1m0.7s", 86400 * 365.25])
def test_every_next_time_is_the_first_multiple_after_t_whatever_the_float_rounding(duration):
    rule = every(duration)
    size = rule.seconds
    for t in [1_764_000_000 + k * 0.1 for k in range(300)] + [n * size for n in range(1_600_000, 1_600_300)]:
        after = rule.next_after(t)
        count = round(after / size)
        assert after > t and after == count * size and (count - 1) * size <= t, (duration, t)


@pytest.mark.parametrize("t", [144300535.5, 808220776.0])
def test_every_next_time_steps_over_a_multiple_that_the_division_rounds_wrongly(t):
    # 144300535.5 / 1.1 rounds up to a whole count; 808220776.0 / 1.1 rounds down below one
    rule = every(1.1)
    after = rule.next_after(t)
    count = round(after / 1.1)
    assert after > t and after == count * 1.1 and (count - 1) * 1.1 <= t


def test_every_takes_a_duration_in_each_form():
    assert every("15m") == every(900) == every(900.0) == every(timedelta(minutes=15)) == every("900s")
    assert every("1h30m").seconds == 5400.0


# Refusals


@pytest.mark.parametrize("text, message", [
    ("0 0 30 feb *", "cron text '0 0 30 feb *' can never match: February has at most 29 days"),
    ("0 0 31 apr,jun *", "cron text '0 0 31 apr,jun *' can never match: April and June have at most 30 days"),
    ("0 0 31 2,4 *", "cron text '0 0 31 2,4 *' can never match: February and April have at most 30 days"),
    ("61 * * * *", "cron field 'minute' value 61 is out of 0-59 in '61 * * * *'"),
    ("0 24 * * *", "cron field 'hour' value 24 is out of 0-23 in '0 24 * * *'"),
    ("0 0 0 * *", "cron field 'day-of-month' value 0 is out of 1-31 in '0 0 0 * *'"),
    ("0 0 32 * *", "cron field 'day-of-month' value 32 is out of 1-31 in '0 0 32 * *'"),
    ("0 0 * 13 *", "cron field 'month' value 13 is out of 1-12 in '0 0 * 13 *'"),
    ("0 0 * * 8", "cron field 'day-of-week' value 8 is out of 0-7 in '0 0 * * 8'"),
    ("*/0 * * * *", "cron field 'minute' step in '*/0' must be a whole number, 1 or more, in '*/0 * * * *'"),
    ("*/x * * * *", "cron field 'minute' step in '*/x' must be a whole number, 1 or more, in '*/x * * * *'"),
    ("0 5-2 * * *", "cron field 'hour' range '5-2' runs backwards in '0 5-2 * * *': write the lower value first"),
    ("x * * * *", "cron field 'minute' item 'x' is not a number, a range a-b or a step */n in 'x * * * *'"),
    ("1,,2 * * * *", "cron field 'minute' item '' is not a number, a range a-b or a step */n in '1,,2 * * * *'"),
    ("-1 * * * *", "cron field 'minute' value '' in '-1' is not a number in '-1 * * * *'"),
    ("0 0 * mon *", "cron field 'month' item 'mon' is not a number or a month name (jan..dec), a range a-b or "
                    "a step */n in '0 0 * mon *'"),
    ("0 0 * * mon-jan", "cron field 'day-of-week' value 'jan' in 'mon-jan' is not a number or a day name "
                        "(sun..sat) in '0 0 * * mon-jan'"),
    ("0 0 * * monday", "cron field 'day-of-week' item 'monday' is not a number or a day name (sun..sat)"),
    ("0 0 L * *", "cron field 'day-of-month' item 'L' is not a number"),
    ("0 0 ? * *", "cron field 'day-of-month' item '?' is not a number"),
    ("* * * *", "cron text '* * * *' has 4 fields; it needs 5: minute hour day-of-month month day-of-week"),
    ("0 0 * * * 2026", "cron text '0 0 * * * 2026' has 6 fields; it needs 5"),
    ("", "cron text '' has 0 fields; it needs 5"),
    ("@reboot", "cron text '@reboot' is not a shorthand: they are @hourly, @daily, @midnight, @weekly"),
    ("@daily 5", "cron text '@daily 5' is not a shorthand"),
])
def test_cron_text_that_does_not_parse_or_never_matches_is_refused_naming_it(text, message):
    with pytest.raises(InvalidArgument) as refused:
        cron(text, zone="UTC")
    assert str(refused.value).startswith(message)
    assert isinstance(refused.value, ValueError)


def test_cron_text_that_is_not_a_str_is_refused():
    with pytest.raises(InvalidArgument, match="cron text must be a str such as '10 3 \\* \\* \\*', not int 5"):
        cron(5, zone="UTC")


def test_the_29th_of_february_and_the_31st_of_some_month_are_valid():
    cron("0 0 29 feb *", zone="UTC")
    cron("0 0 31 jan,apr *", zone="UTC")
    cron("0 0 30 feb mon", zone="UTC")  # both day fields restricted: every Monday


@pytest.mark.parametrize("zone, message", [
    (None, "cron text '0 8 * * *' needs a zone: an IANA zone name such as 'Europe/Berlin' or 'UTC'"),
    ("Mars/Olympus", "the zone 'Mars/Olympus' of cron text '0 8 * * *' is not a known IANA zone name"),
    ("europe/berlin", "the zone 'europe/berlin' of cron text '0 8 * * *' is not a known IANA zone name"),
    ("", "the zone '' of cron text '0 8 * * *' is not a known IANA zone name"),
    ("../etc/passwd", "the zone '../etc/passwd' of cron text '0 8 * * *' is not a known IANA zone name"),
    ("localtime", "the zone of cron text '0 8 * * *' must be a named IANA zone, not 'localtime'"),
    (ZoneInfo("UTC"), "the zone of cron text '0 8 * * *' must be an IANA zone name such as 'Europe/Berlin' or "
                      "'UTC', not ZoneInfo"),
])
def test_a_cron_rule_needs_a_known_zone_name(zone, message):
    with pytest.raises(InvalidArgument) as refused:
        cron("0 8 * * *", zone=zone)
    assert str(refused.value).startswith(message)


def test_cron_without_a_zone_is_refused():
    with pytest.raises(InvalidArgument, match="needs a zone"):
        cron("0 8 * * *")


@pytest.mark.parametrize("duration, message", [
    (0, "every 0 must be a positive duration"),
    ("0s", "every '0s' must be a positive duration"),
    (timedelta(0), "every datetime.timedelta(0) must be a positive duration"),
    (-5, "every -5 must be a positive duration"),
    (timedelta(minutes=-1), "every datetime.timedelta(days=-1, seconds=86340) must be a positive duration"),
    ("500ms", "every '500ms' is under 1 second: a job repeats at most once a second"),
    (0.999, "every 0.999 is under 1 second"),
    ("-5m", "every '-5m' is negative: a duration is zero or more, such as '30s'"),
    ("soon", "every 'soon' is not a duration"),
    (True, "every must be a duration, not True"),
    (None, "every must be a duration, not NoneType None"),
    (math.nan, "every nan must be a finite number of seconds"),
    ("400000d", "every '400000d' is longer than a duration may be"),
])
def test_every_refuses_what_is_not_a_positive_duration_of_a_second_or_more_naming_it(duration, message):
    with pytest.raises(InvalidArgument) as refused:
        every(duration)
    assert str(refused.value).startswith(message)


def test_every_one_second_is_the_shortest_rule():
    assert every("1s").next_after(10.5) == 11.0


# Stored text, str, equality


@pytest.mark.parametrize("rule, stored", [
    (cron("10 3 * * *", zone="Europe/Moscow"), '{"cron": "10 3 * * *", "zone": "Europe/Moscow"}'),
    (cron("  10\t3 *  * *\n", zone="UTC"), '{"cron": "10 3 * * *", "zone": "UTC"}'),
    (cron("@daily", zone="America/New_York"), '{"cron": "@daily", "zone": "America/New_York"}'),
    (every("15m"), '{"every": 900}'),
    (every(timedelta(days=1)), '{"every": 86400}'),
    (every(1.5), '{"every": 1.5}'),
])
def test_a_rule_reads_back_from_its_stored_text_as_an_equal_rule(rule, stored):
    assert rule.stored() == stored
    assert from_stored(stored) == rule
    assert from_stored(rule.stored()).stored() == stored
    assert hash(from_stored(stored)) == hash(rule)


def test_from_stored_gives_back_the_same_rule_for_the_same_text():
    text = '{"cron": "0 8 * * mon", "zone": "Europe/Berlin"}'
    assert from_stored(text) is from_stored(text)
    assert isinstance(from_stored(text), Cron) and isinstance(from_stored('{"every": 60}'), Every)


@pytest.mark.parametrize("text, why", [
    ("", "it is neither"),
    ("{", "it is neither"),
    ("[]", "it is neither"),
    ('"every 15m"', "it is neither"),
    ('{"cron": "* * * * *"}', "it is neither"),
    ('{"every": 900, "zone": "UTC"}', "it is neither"),
    ('{"every": 0}', "every 0 must be a positive duration"),
    ('{"every": "x"}', "every 'x' is not a duration"),
    ('{"cron": "61 * * * *", "zone": "UTC"}', "cron field 'minute' value 61 is out of 0-59"),
    ('{"cron": "* * * * *", "zone": "Nowhere/Town"}', "the zone 'Nowhere/Town'"),
    ('{"cron": "* * * * *", "zone": null}', "needs a zone"),
])
def test_a_damaged_stored_text_is_refused_naming_it(text, why):
    with pytest.raises(ValueError) as refused:
        from_stored(text)
    assert str(refused.value).startswith(f"stored repeat rule {text!r} is damaged: ")
    assert why in str(refused.value)


@pytest.mark.parametrize("rule, text", [
    (cron("10 3 * * *", zone="Europe/Moscow"), 'cron "10 3 * * *" in Europe/Moscow'),
    (cron(" 0  8 * *  MON ", zone="Europe/Berlin"), 'cron "0 8 * * MON" in Europe/Berlin'),
    (cron("@weekly", zone="UTC"), 'cron "@weekly" in UTC'),
    (every("15m"), "every 15m"),
    (every(5400), "every 1h30m"),
    (every("1d"), "every 1d"),
    (every(90), "every 1m30s"),
    (every("1d1s"), "every 1d1s"),
    (every(1.5), "every 1.5s"),
    (every(30), "every 30s"),
])
def test_a_rule_says_itself_for_people(rule, text):
    assert str(rule) == text


def test_a_rules_repr_is_the_call_that_makes_it():
    assert repr(cron("0 8 * * mon", zone="Europe/Berlin")) == "tinystore.cron('0 8 * * mon', zone='Europe/Berlin')"
    assert repr(every("15m")) == "tinystore.every(900)"


def test_a_cron_rule_keeps_its_text_with_whitespace_made_single_spaces_and_its_zone_name():
    rule = cron("  0\t8  * * mon ", zone="Europe/Berlin")
    assert (rule.text, rule.zone) == ("0 8 * * mon", "Europe/Berlin")
    assert rule == cron("0 8 * * mon", zone="Europe/Berlin")


def test_rules_are_equal_by_their_stored_text():
    assert cron("0 8 * * *", zone="UTC") == cron("0 8 * * *", zone="UTC")
    assert cron("0 8 * * *", zone="UTC") != cron("0 8 * * *", zone="Europe/London")
    assert cron("0 0 * * *", zone="UTC") != cron("@daily", zone="UTC")  # the same times, other texts
    assert every("1m") != cron("* * * * *", zone="UTC")
    assert every("1m") != "every 1m"
    assert len({every("1h"), every(3600), cron("0 * * * *", zone="UTC"), cron("0 * * * *", zone="UTC")}) == 2


def test_a_rule_cannot_be_changed():
    rule = cron("0 8 * * *", zone="UTC")
    with pytest.raises(AttributeError):
        rule.zone = "Europe/Berlin"
    with pytest.raises(AttributeError):
        every("1m").seconds = 1
    assert rule.zone == "UTC"


@pytest.mark.parametrize("rule", [cron("0 8 * * mon", zone="Europe/Berlin"), every("15m")])
def test_a_rule_survives_pickle_and_copy(rule):
    assert pickle.loads(pickle.dumps(rule)) == rule
    assert copy.deepcopy(rule) == copy.copy(rule) == rule
    assert pickle.loads(pickle.dumps(rule)).next_after(1_800_000_000.0) == rule.next_after(1_800_000_000.0)
