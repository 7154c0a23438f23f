"""Metrics of a store's jobs, as Prometheus text and through OpenTelemetry.

Per queue: jobs added, started, done, failed (for good), retried and
snoozed, the seconds each handler ran and each job waited from due to start
(histograms), the waiting and running jobs, and whether the queue is paused
(``tinystore_queue_paused``, 1 or 0). Counters and histograms are this
process's own, counted from ``enable`` on (scrape every worker, as
Prometheus does); the gauges are the whole store's, from ``store.stats()``,
read at most once a second. ``BUCKETS`` are the histograms' bucket bounds, in
seconds (1 ms to 1 h); ``CONTENT_TYPE`` is the content type of the Prometheus text.

A store nobody enabled metrics for pays nothing: its core tells no one
(``tinystore._events``).

- ``_recorder``       Metrics: what the core tells, counted; the gauges, read cached
- ``_prometheus``     the text format, written out
- ``_http``           ``GET /metrics`` in a thread
- ``_opentelemetry``  the same instruments on an OpenTelemetry meter (needs ``opentelemetry-api``)
"""

from __future__ import annotations

from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Optional

from . import _http, _prometheus
from ._prometheus import CONTENT_TYPE
from ._recorder import BUCKETS, Metrics, observed

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["BUCKETS", "CONTENT_TYPE", "Metrics", "enable", "enable_opentelemetry", "prometheus_text", "serve_http"]


def enable(store: "Store") -> Metrics:
    """Count the store's jobs in this process from now on; calling it again returns the same Metrics."""
    return observed(store)


def prometheus_text(store: "Store") -> str:
    """The store's metrics in Prometheus' text format (version 0.0.4, ``CONTENT_TYPE``), for an endpoint
    of the application's own. The first call enables them (``enable``): counts begin then."""
    return _prometheus.text(observed(store).snapshot())


def serve_http(store: "Store", port: int = 9100, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Serve ``prometheus_text(store)`` at ``http://host:port/metrics`` from a thread, until the server's
    ``shutdown()``. It binds 127.0.0.1 unless told otherwise; port 0 takes a free port
    (``server.server_address`` says which). An ``OSError`` says why the port could not be had."""
    metrics = observed(store)
    return _http.serve(lambda: _prometheus.text(metrics.snapshot()), port, host)


def enable_opentelemetry(store: "Store", meter_provider: Optional[Any] = None) -> Metrics:
    """The same metrics as OpenTelemetry instruments, on ``meter_provider``'s meter "tinystore" (the
    global provider unless given): observable counters and gauges, read when the provider collects, and
    histograms, recorded as attempts start and end from now on. Needs ``opentelemetry-api``
    (``pip install tinystore[opentelemetry]``)."""
    from ._opentelemetry import instrument
    metrics = observed(store)
    instrument(metrics, meter_provider)
    return metrics
