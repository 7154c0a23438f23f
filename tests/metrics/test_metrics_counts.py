"""tinystore.metrics in one process, on a fake clock: what each attempt adds to the counters and histograms."""

from __future__ import annotations

import pytest
from scrape import samples, types

import tinystore
import tinystore.metrics
from tinystore.testing import FakeClock


def test_each_outcome_of_an_attempt_is_counted_once_for_its_queue(store: tinystore.Store) -> None:
    q = store.queue("work", attempts=2, backoff=("1s", "1s"))
    tinystore.metrics.enable(store)
    snoozed: set[str] = set()

    @q.work
    def handler(payload: dict, run: tinystore.Run) -> object:
        how = payload["how"]
        if how == "raise":
            raise ValueError("no")
        if how == "retry" and run.attempt == 1:
            return run.retry("1s")
        if how == "snooze" and run.id not in snoozed:
            snoozed.add(run.id)
            return run.snooze("1s")
        if how == "fail":
            return run.fail("given up")
        return None

    for how in ("ok", "ok", "raise", "retry", "snooze", "fail"):
        q.add({"how": how})
    q.add({"how": "ok"}, id="same")
    q.add({"how": "ok"}, id="same")  # its id is taken: adds nothing
    store.run_until_idle()
    store.clock.advance("2s")  # past every backoff, jittered
    store.run_until_idle()

    got = samples(tinystore.metrics.prometheus_text(store))
    count = {name: got[(f"tinystore_jobs_{name}_total", "work")]
             for name in ("added", "started", "done", "failed", "retried", "snoozed")}
    # attempt 1: 3 done, raise retried, retry retried, snooze snoozed, fail failed; then raise failed for
    # good, retry done, snooze done (a snoozed run is not counted as an attempt, but it starts)
    assert count == {"added": 7, "started": 10, "done": 5, "failed": 2, "retried": 2, "snoozed": 1}
    stats = store.stats()["work"]
    assert (count["failed"], stats["failed"]) == (2, 2)
    assert got[("tinystore_run_seconds_count", "work")] == count["started"]
    assert got[("tinystore_claim_delay_seconds_count", "work")] == count["started"]
    assert got[("tinystore_run_seconds_bucket", "work", "+Inf")] == count["started"]


def test_histograms_put_a_claim_delay_and_a_run_time_in_their_buckets(store: tinystore.Store,
                                                                      clock: FakeClock) -> None:
    q = store.queue("slow")
    tinystore.metrics.enable(store)

    @q.work
    def handler(payload: dict, run: tinystore.Run) -> None:
        clock.advance("0.3s")  # the handler runs 0.3 s by the store's clock

    q.add({}, delay="10s")
    clock.advance("15s")  # due 5 s ago when it starts
    store.run_until_idle()

    text = tinystore.metrics.prometheus_text(store)
    got = samples(text)
    assert types(text)["tinystore_claim_delay_seconds"] == "histogram"
    assert got[("tinystore_claim_delay_seconds_sum", "slow")] == pytest.approx(5.0)
    assert got[("tinystore_claim_delay_seconds_bucket", "slow", "2.5")] == 0
    assert got[("tinystore_claim_delay_seconds_bucket", "slow", "5.0")] == 1
    assert got[("tinystore_run_seconds_sum", "slow")] == pytest.approx(0.3)
    assert got[("tinystore_run_seconds_bucket", "slow", "0.25")] == 0
    assert got[("tinystore_run_seconds_bucket", "slow", "0.5")] == 1
    buckets = [v for k, v in got.items() if k[:2] == ("tinystore_run_seconds_bucket", "slow")]
    assert buckets == sorted(buckets) and len(buckets) == len(tinystore.metrics.BUCKETS) + 1


def test_a_queue_nothing_happened_to_shows_zero_counts_and_the_stores_gauges(store: tinystore.Store) -> None:
    q = store.queue("idle")
    q.add({})
    q.add({}, delay="1h")  # scheduled: neither waiting nor running
    got = samples(tinystore.metrics.prometheus_text(store))  # enabled by this call: the adds came before
    assert got[("tinystore_jobs_added_total", "idle")] == 0
    assert got[("tinystore_jobs_waiting", "idle")] == 1
    assert got[("tinystore_jobs_running", "idle")] == 0


def test_a_paused_queue_shows_1_in_its_paused_gauge_and_the_others_0(store: tinystore.Store) -> None:
    store.queue("held").pause()
    store.queue("open")
    text = tinystore.metrics.prometheus_text(store)
    got = samples(text)
    assert types(text)["tinystore_queue_paused"] == "gauge"
    assert (got[("tinystore_queue_paused", "held")], got[("tinystore_queue_paused", "open")]) == (1, 0)


def test_label_values_are_escaped_so_that_a_parser_reads_them_back(store: tinystore.Store) -> None:
    metrics = tinystore.metrics.enable(store)
    odd = 'a "quoted" back\\slash\nand a new line'  # no queue is named so; a label value may be anything
    metrics.added(odd, 3)
    got = samples(tinystore.metrics.prometheus_text(store))
    assert got[("tinystore_jobs_added_total", odd)] == 3


def test_enable_twice_gives_the_same_metrics(store: tinystore.Store) -> None:
    assert tinystore.metrics.enable(store) is tinystore.metrics.enable(store)
