"""What the page shows, read through the store's public API and made into JSON: no web code here.

Every read is bounded however many jobs the store holds: counts come from
``stats()`` (the jobs per queue and state the store keeps) and ``minute_counts``,
a page of jobs from ``queue.jobs`` (by index, after an id), a job from
``queue.detail``. Input from the browser is checked here, as every entry
point checks its own: what is wrong raises ``InvalidArgument`` saying so.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Mapping, Optional, cast

from .._errors import InvalidArgument
from .._holders import holder_gone
from .._jobstate import STATES, JobState, JobStateName
from .._queue import Queue
from .._store import Store
from .._values import check_text_id
from ..backends._engine.leases import KEPT_ATTEMPTS

STORED = STATES[:5]  # the states a job is kept in; cancelled ones are gone
MINUTES = 60  # the chart's hour
BUSIEST = 5  # the groups shown against group_concurrency
PAGE = 50
MAX_PAGE = 200


class NotFound(Exception):
    """A queue or a job the store does not keep: the page says so (404)."""


def iso(at: Optional[datetime]) -> Optional[str]:
    return None if at is None else at.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def _seconds(t: float) -> Optional[str]:
    return iso(datetime.fromtimestamp(t, timezone.utc))


def _rate(rate: Optional[tuple[int, float]]) -> Optional[str]:
    """A rate as users write it: 600/m, 10/s, 5/30s."""
    if rate is None:
        return None
    count, period = rate
    unit = {1.0: "s", 60.0: "m", 3600.0: "h"}.get(period, f"{period:g}s")
    return f"{count}/{unit}"


# The queues

def overview(store: Store) -> dict[str, Any]:
    """Every queue: whether it is paused, jobs per state, the last hour per minute, its limits and how
    full they are, its schedule; and the totals per state, for the diagram."""
    stats = store.stats()
    minutes = store.minute_counts(MINUTES)
    first = int(store.clock.now() // 60) - MINUTES + 1
    queues = [_queue(store.queue(name), stats[name], minutes.get(name, []), first) for name in sorted(stats)]
    totals = {state: sum(s[state] for s in stats.values()) for state in STORED}
    hour = {key: sum(sum(q["hour"][key]) for q in queues) for key in ("started", "done", "failed")}
    return {"store": store.location, "totals": totals, "hour": hour, "queues": queues,
            "hour_from": _seconds(first * 60)}


def _queue(queue: Queue, counts: dict[str, Any], minutes: list[dict[str, Any]], first: int) -> dict[str, Any]:
    queue.reload()  # the limits as the store keeps them: another process may have changed them
    opts = queue.options
    usage = queue.usage(BUSIEST)
    hour = {key: [0] * MINUTES for key in ("started", "done", "failed")}
    for m in minutes:
        i = int(m["minute"].timestamp() // 60) - first
        if 0 <= i < MINUTES:
            for key in hour:
                hour[key][i] = m[key]
    return {
        "name": queue.name,
        "paused": counts["paused"],
        "counts": {state: counts[state] for state in STORED},
        "oldest_due_age": counts["oldest_due_age"],
        "last_minute": {"started": counts["started_last_minute"], "done": counts["done_last_minute"],
                        "failed": counts["failed_last_minute"]},
        "hour": hour,
        "limits": {"concurrency": opts.concurrency, "running": counts["running"], "rate": _rate(opts.rate),
                   "rate_used": usage["rate_used"], "group_concurrency": opts.group_concurrency,
                   "group_rate": _rate(opts.group_rate), "busiest_groups": usage["busiest_groups"]},
        "schedule": _schedule(queue),
    }


def _schedule(queue: Queue) -> Optional[dict[str, Any]]:
    """A schedule is a queue holding a repeating job whose id is the queue's name: its rule, its next time."""
    job = queue.get(queue.name)
    if job is None or job.repeat is None:
        return None
    return {"rule": str(job.repeat), "next": iso(job.at), "state": job.state}


# A page of jobs

def _text(query: Mapping[str, str], name: str) -> Optional[str]:
    value = query.get(name)
    return value if value else None


def known_queue(store: Store, name: Optional[str]) -> Queue:
    if name is None:
        raise InvalidArgument("name a queue: queue=NAME")
    if name not in store.queues():
        raise NotFound(f"no queue named {name!r} in {store.location}")
    return store.queue(name)


def jobs_page(store: Store, query: Mapping[str, str]) -> dict[str, Any]:
    """A page of one queue's jobs in id order, filtered by state, group and id prefix; ``next`` is the
    ``after`` of the next page, or None on the last."""
    queue = known_queue(store, _text(query, "queue"))
    state, group, prefix, after = (_text(query, k) for k in ("state", "group", "prefix", "after"))
    for name, value in (("group", group), ("prefix", prefix), ("after", after)):
        if value is not None:
            check_text_id(value, name, queue.name)
    limit = _limit(query.get("limit"))
    jobs: list[JobState] = []
    if prefix is not None and (after is None or after < prefix):
        first = queue.get(prefix)  # the id itself, then the ids after it that begin with it
        if first is not None and (state is None or first.state == state) and (group is None or first.group == group):
            jobs.append(first)
        after = prefix
    # queue.jobs refuses a state that is no state's name
    more = queue.jobs(state=cast(Optional[JobStateName], state), group=group, limit=limit + 1 - len(jobs), after=after)
    jobs += _taking(more, prefix)
    page, rest = jobs[:limit], jobs[limit:]
    return {"queue": queue.name, "jobs": [_row(j) for j in page],
            "next": page[-1].id if rest else None}


def _taking(jobs: list[JobState], prefix: Optional[str]) -> list[JobState]:
    """The jobs up to the first whose id does not begin with ``prefix`` (ids come in order)."""
    if prefix is None:
        return jobs
    taken = []
    for job in jobs:
        if not job.id.startswith(prefix):
            break
        taken.append(job)
    return taken


def _limit(text: Optional[str]) -> int:
    if not text:
        return PAGE
    try:
        limit = int(text)
    except ValueError:
        raise InvalidArgument(f"limit={text!r} must be a whole number from 1 to {MAX_PAGE}") from None
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidArgument(f"limit={text!r} must be a whole number from 1 to {MAX_PAGE}")
    return limit


def _row(job: JobState) -> dict[str, Any]:
    return {"id": job.id, "state": job.state, "priority": job.priority, "group": job.group, "at": iso(job.at),
            "attempt": job.attempt,
            "attempts": job.attempts, "error": job.error.splitlines()[0] if job.error else None}


# One job

def job_page(store: Store, queue_name: Optional[str], id: Optional[str]) -> dict[str, Any]:
    """Everything the store keeps about one job, and its timeline as far as the store keeps it."""
    queue = known_queue(store, queue_name)
    if id is None:
        raise InvalidArgument("name a job: id=ID")
    found = queue.detail(id)
    if found is None:
        raise NotFound(f"no job {id!r} in queue {queue.name!r} (done jobs are kept only while dedupe says)")
    job, detail = found
    lease = detail.lease
    data = {
        "id": job.id, "queue": job.queue, "state": job.state, "payload": job.payload, "group": job.group,
        "priority": job.priority, "at": iso(job.at), "attempt": job.attempt, "attempts": job.attempts, "error": job.error,
        "progress": job.progress, "ahead": job.ahead if job.state == "waiting" else None,
        "result": job.result, "repeat": None if job.repeat is None else str(job.repeat),
        "steps": [{"name": s.name, "attempt": s.attempt, "answer": json.loads(s.answer)} for s in detail.steps],
        "lease": None if lease is None else {"attempt": lease.attempt, "expires": _seconds(lease.expires),
                                             "pid": lease.pid, "host": lease.host,
                                             "gone": holder_gone(lease, store.clock.now())},
        "attempt_history": [{"attempt": a.attempt, "began": None if a.began is None else _seconds(a.began),
                             "ended": _seconds(a.ended), "error": a.error} for a in detail.attempts],
        "attempts_kept": KEPT_ATTEMPTS,
    }
    failed = job.state == "failed" and detail.attempts
    data["failed_at"] = _seconds(detail.attempts[-1].ended) if failed else None
    data["timeline"] = _timeline(data)
    return data


def _timeline(job: dict[str, Any]) -> list[dict[str, str]]:
    """The moments the store keeps of a job, in order: when it is or was due, its lease, its attempts kept
    (each one's start and end), its end."""
    due = "due" if job["state"] in ("scheduled", "waiting") else "last due"
    events = [{"at": job["at"], "what": f"{due} (attempt {job['attempt']} of {job['attempts']} so far)"}]
    lease = job["lease"]
    if lease is not None and lease["gone"]:
        events.append({"at": lease["expires"], "what": f"lease of attempt {lease['attempt']}: its holder is gone: "
                                                       f"{lease['gone']}"})
    elif lease is not None:
        events.append({"at": lease["expires"], "what": f"lease of attempt {lease['attempt']}, held by pid "
                                                       f"{lease['pid']} on {lease['host']}, ends unless renewed"})
    for a in job["attempt_history"]:
        if a["began"] is not None:
            events.append({"at": a["began"], "what": f"attempt {a['attempt']} began"})
        ended = f"attempt {a['attempt']} ended" + (f": {a['error'].splitlines()[0]}" if a["error"] else "")
        events.append({"at": a["ended"], "what": ended})
    if job["state"] in ("done", "failed"):
        events.append({"at": job["failed_at"], "what": f"{job['state']} after attempt {job['attempt']}"})
    return sorted(events, key=lambda e: (e["at"] is None, e["at"] or ""))  # ISO times in UTC sort as text
