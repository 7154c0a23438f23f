"""Values that cannot be a job's: refused before anything is written, and rows that hold one read anyway.

A job's time is within years 1 to 9999 UTC and its text is UTF-8 (LIM-04):
``add`` refuses anything else with an InvalidArgument naming the queue and
the job, and writes nothing. A row that holds a time out of that range
(written by an earlier version) reads as the nearest end of the range, so
one such row never stops ``get``, ``jobs``, the command line or a worker.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

import tinystore

FAR_WEST = timezone(timedelta(hours=-5))


def job_rows(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM tinystore_jobs").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("when", [
    {"delay": "99999999d"}, {"delay": 1e20}, {"delay": 10 ** 400}, {"at": 1e18}, {"at": -1e13},
    {"at": 10 ** 400}, {"at": datetime(9999, 12, 31, 23, tzinfo=FAR_WEST)},
], ids=["delay-99999999d", "delay-1e20", "delay-10e400", "at-1e18", "at-minus-1e13", "at-10e400",
        "at-past-9999-by-its-offset"])
def test_LIM_04_add_refuses_a_time_outside_years_1_to_9999_naming_queue_and_job_and_writes_nothing(
        store, store_path, when):
    q = store.queue("mail")
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add({"n": 1}, id="far", **when)
    assert (caught.value.queue, caught.value.job_id) == ("mail", "far")
    assert any(why in str(caught.value) for why in ("years 1 to 9999", "1000 years", "finite"))
    assert q.get("far") is None and q.jobs() == []
    assert job_rows(store_path) == 0


def test_LIM_04_add_many_with_one_time_out_of_range_writes_none_of_its_jobs(store, store_path):
    q = store.queue("mail")
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add_many([tinystore.Job({}, id="a"), tinystore.Job({}, id="b", delay="99999999d"), tinystore.Job({}, id="c")])
    assert caught.value.job_id == "b"
    assert job_rows(store_path) == 0


def test_the_first_and_last_seconds_of_years_1_to_9999_are_times_a_job_can_have(store):
    q = store.queue("mail")
    first = q.add({}, id="first", at=datetime(1, 1, 1, tzinfo=timezone.utc))
    last = q.add({}, id="last", at=datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc))
    assert (first.at.year, last.at.year) == (1, 9999)
    assert [j.id for j in q.jobs()] == ["first", "last"]


@pytest.mark.parametrize("option", [{"keep": "99999999d"}, {"lease": 1e20}, {"backoff": ("1s", "400000d")},
                                    {"rate": "5/99999999d"}])
def test_a_queue_option_longer_than_1000_years_is_an_InvalidArgument_and_is_not_kept(store, option):
    with pytest.raises(tinystore.InvalidArgument) as caught:
        store.queue("mail", **option)
    assert caught.value.queue == "mail" and "1000 years" in str(caught.value)
    assert store.queues() == []


def write_time(path: str, id: str, at: float) -> None:
    """Give a job a time out of range directly in the file, as an earlier version could have."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE tinystore_jobs SET at = ? WHERE id = ?", (at, id))
    conn.close()


def test_a_row_whose_time_is_out_of_range_reads_as_the_end_of_the_range_and_the_queue_goes_on(
        store, store_path):
    q = store.queue("mail")
    ran = []
    q.work(lambda payload, run: ran.append((payload["n"], run.at.year)))
    for n in range(7):
        q.add({"n": n}, id=f"j{n}")
    write_time(store_path, "j5", 1e20)   # never due: past year 9999
    write_time(store_path, "j6", -1e13)  # due long ago: before year 1

    assert q.get("j5").at == datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc)
    assert q.get("j5").state == "scheduled"
    assert q.get("j6").at == datetime(1, 1, 1, tzinfo=timezone.utc)
    assert len(q.jobs()) == 7

    store.run_until_idle()  # the worker that claims j6 runs it, and every good job, and nothing stays running
    assert sorted(ran) == [(0, 2027), (1, 2027), (2, 2027), (3, 2027), (4, 2027), (6, 1)]
    assert [(j.id, j.state) for j in q.jobs()] == [("j5", "scheduled")]
    assert store.stats()["mail"]["running"] == 0

    listed = subprocess.run([sys.executable, "-m", "tinystore.cli", "jobs", store_path, "mail", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert '"at": "9999-12-31T23:59:59Z"' in listed.stdout


def test_LIM_04_a_payload_with_a_lone_surrogate_is_an_InvalidArgument_naming_queue_and_job(store, store_path):
    q = store.queue("mail")
    for payload in ("\ud800", {"text": "a\udfffb"}, ["ok", {"\ud83d": 1}]):
        with pytest.raises(tinystore.InvalidArgument) as caught:
            q.add(payload, id="s")
        assert (caught.value.queue, caught.value.job_id) == ("mail", "s")
        assert "surrogate" in str(caught.value)
    assert job_rows(store_path) == 0


@pytest.mark.parametrize("field", ["id", "group"])
def test_LIM_04_an_id_or_group_with_a_lone_surrogate_is_an_InvalidArgument_naming_the_queue(store, store_path, field):
    q = store.queue("mail")
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add({}, **{field: "job\ud800"})
    assert caught.value.queue == "mail" and "UTF-8" in str(caught.value)
    for read in (q.get, q.cancel, q.retry):
        with pytest.raises(tinystore.InvalidArgument):
            read("job\ud800")
    assert job_rows(store_path) == 0


@pytest.mark.parametrize("given", [{"delay": "-5m"}, {"at": datetime(2020, 1, 1)}, {"priority": 500},
                                   {"payload": {1j}}, {"group": ""}],
                         ids=["delay", "naive-at", "priority", "payload", "group"])
def test_an_error_about_an_add_without_an_id_names_the_queue_and_a_new_job_not_an_id_never_seen(
        store, store_path, given):
    q = store.queue("mail")
    payload = given.pop("payload", {"n": 1})
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add(payload, **given)
    assert str(caught.value).endswith("(queue 'mail', a new job)"), str(caught.value)
    assert (caught.value.queue, caught.value.job_id) == ("mail", None)
    assert job_rows(store_path) == 0


def test_an_error_about_a_new_job_joining_a_closed_batch_says_a_new_job(store):
    q = store.queue("mail")
    batch = store.batch(then=(store.queue("report"), {}))
    batch.close()
    with pytest.raises(tinystore.InvalidArgument) as caught:
        q.add({"n": 1}, batch=batch)
    assert "closed" in str(caught.value) and str(caught.value).endswith("(queue 'mail', a new job)")
