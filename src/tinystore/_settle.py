"""What happens to a job when an attempt ends: the one place that decides it.

Backends apply these decisions; they never compute backoff or count attempts
themselves, so every backend settles alike. An attempt whose lease ended
without a settlement (its process died, stalled or was stopped) is decided
by ``decide_lost``, which a backend applies as it ends such leases, in bulk
where it must (its SQL says so where it does).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Optional, Union

from ._answers import Fail, Retry, Snooze
from ._errors import InvalidArgument
from ._options import QueueOptions
from ._repeat import Repeat, from_stored

LOST_LEASE = "lease ended without a settlement: the worker died, stalled or was stopped"


@dataclass(frozen=True)
class Done:
    """The job is done; kept until ``expires``, or removed at once when None, with its ``result`` (JSON text)."""

    expires: Optional[float]
    result: Optional[str] = None

    @property
    def leaves(self) -> bool:
        """Whether the job leaves the store at once (no ``dedupe``): nothing of it is kept."""
        return self.expires is None


@dataclass(frozen=True)
class Requeue:
    """The job waits for ``at`` again; ``uncount`` gives the attempt back, ``reset`` sets its attempts to zero
    (a repeating job waiting for its next time); ``result`` is what the attempt returned (JSON text)."""

    at: float
    error: Optional[str]
    uncount: bool = False
    reset: bool = False
    result: Optional[str] = None


@dataclass(frozen=True)
class Failed:
    """The job failed for good; kept with ``error`` until ``expires``."""

    error: str
    expires: float


Decision = Union[Done, Requeue, Failed]


@dataclass(frozen=True)
class Errored:
    """An attempt that raised or timed out, with its error text."""

    error: str


def storable(text: str) -> str:
    """Error text as the store can keep it: a lone surrogate (from an exception's message, or a reason
    given to ``run.fail``) becomes its escape instead of failing the settlement of the whole batch."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def jittered(seconds: float) -> float:
    """``seconds`` made a tenth longer or shorter at random (JOB-07)."""
    return seconds * random.uniform(0.9, 1.1)


def decide(answer: object, attempt: int, opts: QueueOptions, now: float, result: Optional[str] = None) -> Decision:
    """The decision for how an attempt ended: Retry, Snooze, Fail, Errored, or any other return (done, with
    ``result``, the JSON text of what the handler returned)."""
    if isinstance(answer, Snooze):
        return Requeue(now + answer.delay, None, uncount=True)
    if isinstance(answer, Fail):
        return Failed(storable(answer.reason), now + opts.keep)
    if isinstance(answer, Retry):
        error = f"retry requested after {answer.delay:g}s"
        if attempt >= opts.attempts:
            return Failed(error, now + opts.keep)
        return Requeue(now + answer.delay, error)
    if isinstance(answer, Errored):
        error = storable(answer.error)
        if attempt >= opts.attempts:
            return Failed(error, now + opts.keep)
        return Requeue(now + jittered(opts.backoff_for(attempt)), error)
    return Done(now + opts.dedupe if opts.dedupe > 0 else None, result)


def decide_lost(attempt: int, opts: QueueOptions, now: float, repeat: Optional[str] = None,
                due: float = 0.0) -> Decision:
    """The decision for an attempt whose lease ended without a settlement.

    The attempt stays counted (JOB-04), so a handler that kills its process
    every time still reaches ``attempts``; otherwise it runs again at once.
    ``repeat`` is the job's rule as stored, where it repeats (its time ``due``).
    """
    decision: Decision = Failed(LOST_LEASE, now + opts.keep) if attempt >= opts.attempts else Requeue(now, LOST_LEASE)
    rule = rule_of(repeat)
    return repeating(decision, rule, due, now) if rule is not None else decision


def lost_in_bulk(opts: QueueOptions, now: float) -> dict[str, object]:
    """``decide_lost`` for many jobs at once that do not repeat, as the parameters of the statement that
    applies it to a dead process's leases (``owner_lost``): a job whose attempt reached ``attempts`` ends
    as ``failed_*`` says, any other waits again as ``again_*`` says."""
    failed = decide_lost(opts.attempts, opts, now)
    again = decide_lost(0, opts, now)
    assert isinstance(failed, Failed) and isinstance(again, Requeue) and not (again.uncount or again.reset)
    return {"attempts": opts.attempts, "failed_expires": failed.expires, "failed_error": failed.error,
            "again_at": again.at, "again_error": again.error}


def repeating(decision: Decision, repeat: Repeat, due: float, now: float) -> Decision:
    """What ``decision`` becomes for a job that repeats by a rule: it is never done and never fails for
    good, but waits for its rule's next time after its own time (``due``) and after now, its attempts
    from zero, keeping a failure as its error. A retry or snooze that would pass the next time is not
    made: the job waits for the next time instead, so it never misses one."""
    try:
        upcoming = repeat.next_after(max(due, now))
    except InvalidArgument:  # no time of its rule is left before the year 10000: it ends as any job does
        return decision
    if isinstance(decision, Done):
        return Requeue(upcoming, None, reset=True, result=decision.result)
    if isinstance(decision, Failed):
        return Requeue(upcoming, decision.error, reset=True)
    if decision.at > upcoming:
        return Requeue(upcoming, decision.error, reset=True)
    return decision


def outcome(decision: Decision) -> str:
    """How an attempt ended, in a word, as metrics, logs and a queue's runs per minute count it: done,
    failed (for good), retried, or snoozed (not counted). A repeating job's run is done or failed
    although the job waits for its next time."""
    if isinstance(decision, Done) or (isinstance(decision, Requeue) and decision.reset and decision.error is None):
        return "done"
    if isinstance(decision, Failed) or (isinstance(decision, Requeue) and decision.reset):
        return "failed"
    return "snoozed" if decision.uncount else "retried"


def rule_of(stored: Optional[str]) -> Optional[Repeat]:
    """The repeat rule a job keeps, or None where it does not repeat (or its rule cannot be read: it then
    ends as a job that does not repeat, rather than stopping its queue)."""
    if stored is None:
        return None
    try:
        return from_stored(stored)
    except ValueError:
        return None


def gives_work(settlements: list[Any], stale: list[Any], opts: QueueOptions) -> bool:
    """Whether applying ``settlements`` (the ``stale`` ones changed nothing) may let another process
    claim: a job waits again, or, where the queue limits how many run at once, a place was freed. A job
    done or failed under no such limit gives nobody work, and its commit tells nobody."""
    if len(stale) == len(settlements):
        return False
    if opts.concurrency is not None or opts.group_concurrency is not None:
        return True
    kept = {id(s) for s in stale}
    return any(isinstance(s.decision, Requeue) for s in settlements if id(s) not in kept)


def lost(now: float) -> Requeue:
    """An attempt that could not be settled as it ended (its worker stopped past the grace period):
    the job runs again at once, the attempt counted."""
    return Requeue(now, LOST_LEASE)


def given_back(at: float) -> Requeue:
    """A job claimed but never started (its worker was stopping): it waits again for ``at``, as it was,
    the attempt not counted."""
    return Requeue(at, None, uncount=True)
