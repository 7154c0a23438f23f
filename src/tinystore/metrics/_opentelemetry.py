"""The metrics as OpenTelemetry instruments: what ``tinystore.metrics.enable_opentelemetry`` makes."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Iterator, Optional

from opentelemetry import metrics as otel

from .. import __version__
from ._prometheus import COUNTER_HELP, DELAY_HELP, GAUGE_HELP, RUN_HELP
from ._recorder import BUCKETS, COUNTERS, GAUGES, Metrics


class Histograms:
    """Told each observation by ``Metrics`` (one of its ``listeners``), recorded on the meter's histograms."""

    def __init__(self, meter: Any):
        self.run = meter.create_histogram("tinystore.run.duration", unit="s", description=RUN_HELP,
                                          explicit_bucket_boundaries_advisory=list(BUCKETS))
        self.delay = meter.create_histogram("tinystore.claim.delay", unit="s", description=DELAY_HELP,
                                            explicit_bucket_boundaries_advisory=list(BUCKETS))

    def claim_delays(self, queue: str, delays: list[float]) -> None:
        attributes = {"queue": queue}
        for delay in delays:
            self.delay.record(delay, attributes)

    def run_seconds(self, queue: str, seconds: float) -> None:
        self.run.record(seconds, {"queue": queue})


def instrument(metrics: Metrics, meter_provider: Optional[Any]) -> None:
    """Make the instruments on the provider's meter "tinystore", reading and told by ``metrics``."""
    meter = (meter_provider or otel.get_meter_provider()).get_meter("tinystore", __version__)
    for name in COUNTERS:
        meter.create_observable_counter(f"tinystore.jobs.{name}", [_observe(partial(metrics.counted, name))],
                                        unit="{job}", description=COUNTER_HELP[name])
    for name in GAUGES:
        metric, unit = ("tinystore.queue.paused", "1") if name == "paused" else (f"tinystore.jobs.{name}", "{job}")
        meter.create_observable_gauge(metric, [_observe(partial(_gauge, metrics, name))],
                                      unit=unit, description=GAUGE_HELP[name])
    metrics.listeners.append(Histograms(meter))


def _gauge(metrics: Metrics, name: str) -> dict[str, int]:
    return {queue: values[name] for queue, values in metrics.gauges().items()}


def _observe(read: Callable[[], dict[str, int]]) -> Callable[[Any], Iterator[otel.Observation]]:
    """An instrument's callback: one observation per queue of what ``read()`` gives."""
    def callback(options: Any) -> Iterator[otel.Observation]:
        for queue, value in read().items():
            yield otel.Observation(value, {"queue": queue})
    return callback
