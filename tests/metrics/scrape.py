"""Reading Prometheus text as a scraper does: parsed by prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple, float]:
    """Every sample of ``text``: (name, queue) -> value, and (name, queue, le) for histogram buckets."""
    found: dict[tuple, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, s.labels["queue"]) + ((s.labels["le"],) if "le" in s.labels else ())
            assert key not in found, f"{key} twice"
            found[key] = s.value
    return found


def types(text: str) -> dict[str, str]:
    """Each metric family's declared type."""
    return {family.name: family.type for family in text_string_to_metric_families(text)}
