"""tinystore.metrics.enable_opentelemetry: the same metrics, read by the OpenTelemetry SDK's in-memory reader."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tinystore
import tinystore.metrics
from tinystore.testing import FakeClock


def points(reader: InMemoryMetricReader) -> dict[tuple[str, str], Any]:
    """(instrument name, queue) -> its data point, from one collection."""
    found = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "tinystore"
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    found[(metric.name, point.attributes["queue"])] = point
    return found


def test_counters_histograms_and_gauges_reach_an_opentelemetry_reader(store: tinystore.Store,
                                                                       clock: FakeClock) -> None:
    reader = InMemoryMetricReader()
    tinystore.metrics.enable_opentelemetry(store, meter_provider=MeterProvider(metric_readers=[reader]))
    q = store.queue("mail", attempts=1)

    @q.work
    async def handler(payload: dict, run: tinystore.AsyncRun) -> None:
        clock.advance("2s")  # on the loop, one handler after the other: each runs 2 s
        if payload["boom"]:
            raise ValueError("boom")

    q.add({"boom": False})
    q.add({"boom": True})
    q.add({"boom": False}, delay="1h")
    store.run_until_idle()

    got = points(reader)
    counted = {name: got[(f"tinystore.jobs.{name}", "mail")].value
               for name in ("added", "started", "done", "failed", "retried", "snoozed")
               if (f"tinystore.jobs.{name}", "mail") in got}
    assert counted == {"added": 3, "started": 2, "done": 1, "failed": 1}  # nothing retried or snoozed yet
    run = got[("tinystore.run.duration", "mail")]
    assert (run.count, run.sum) == (2, pytest.approx(4.0))
    assert list(run.explicit_bounds) == list(tinystore.metrics.BUCKETS)
    assert got[("tinystore.claim.delay", "mail")].count == 2
    assert got[("tinystore.jobs.waiting", "mail")].value == 0  # the third is scheduled, not due
    assert got[("tinystore.jobs.running", "mail")].value == 0
    assert got[("tinystore.queue.paused", "mail")].value == 0
