"""Prometheus' text exposition format, version 0.0.4, written out: a few lines per metric, no library."""

from __future__ import annotations

from ._recorder import BUCKETS, COUNTERS, GAUGES, Histogram, Snapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

COUNTER_HELP = {
    "added": "Jobs this process added (a job whose id was taken adds nothing).",
    "started": "Attempts this process started: jobs claimed, their handlers begun.",
    "done": "Jobs whose attempt in this process ended done.",
    "failed": "Jobs whose attempt in this process failed them for good.",
    "retried": "Attempts in this process that ended and left their job to run again "
               "(an error, a timeout, run.retry).",
    "snoozed": "Attempts in this process that snoozed (run.snooze): they run again, not counted.",
}
GAUGE_HELP = {
    "waiting": "Jobs of the queue that are due and wait for a worker, in the whole store.",
    "running": "Jobs of the queue that a worker holds a lease on, in the whole store.",
    "paused": "1 where the queue is paused (no process starts its jobs), else 0, as the store keeps it.",
}
GAUGE_METRICS = {"waiting": "tinystore_jobs_waiting", "running": "tinystore_jobs_running",
                 "paused": "tinystore_queue_paused"}
RUN_HELP = "Seconds an attempt's handler ran, from its start to its settlement, in this process."
DELAY_HELP = "Seconds from when a job was due to when this process started it."


def text(snapshot: Snapshot) -> str:
    """Every metric of ``snapshot``, a series per queue; a queue nothing happened to shows zeros."""
    queues = snapshot.queues()
    lines: list[str] = []
    for name in COUNTERS:
        counts = snapshot.counts[name]
        lines += _head(f"tinystore_jobs_{name}_total", "counter", COUNTER_HELP[name])
        lines += [f"tinystore_jobs_{name}_total{_labels(queue=q)} {counts.get(q, 0)}" for q in queues]
    for metric, histograms, help in (("tinystore_run_seconds", snapshot.run_seconds, RUN_HELP),
                                     ("tinystore_claim_delay_seconds", snapshot.claim_delay, DELAY_HELP)):
        lines += _head(metric, "histogram", help)
        for q in queues:
            lines += _histogram(metric, q, histograms.get(q) or Histogram())
    for name in GAUGES:
        metric = GAUGE_METRICS[name]
        lines += _head(metric, "gauge", GAUGE_HELP[name])
        lines += [f"{metric}{_labels(queue=q)} {snapshot.gauges.get(q, {}).get(name, 0)}"
                  for q in queues]
    return "\n".join(lines) + "\n"


def _head(metric: str, kind: str, help: str) -> list[str]:
    return [f"# HELP {metric} {help}", f"# TYPE {metric} {kind}"]  # help texts above: nothing to escape


def _histogram(metric: str, queue: str, histogram: Histogram) -> list[str]:
    lines, total = [], 0
    for bound, count in zip(BUCKETS + (float("inf"),), histogram.counts):
        total += count
        le = "+Inf" if bound == float("inf") else repr(bound)
        lines.append(f"{metric}_bucket{_labels(queue=queue, le=le)} {total}")
    lines.append(f"{metric}_sum{_labels(queue=queue)} {histogram.sum!r}")
    lines.append(f"{metric}_count{_labels(queue=queue)} {total}")
    return lines


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{name}="{escape(value)}"' for name, value in labels.items()) + "}"


def escape(value: str) -> str:
    """A label value as the format spells it: backslash, double quote and line feed escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
