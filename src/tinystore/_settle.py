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
from typing import Optional, Union

from ._answers import Fail, Retry, Snooze
from ._options import QueueOptions

LOST_LEASE = "lease ended without a settlement: the worker died, stalled or was stopped"


@dataclass(frozen=True)
class Done:
    """The job is done; kept until ``expires``, or removed at once when None."""

    expires: Optional[float]


@dataclass(frozen=True)
class Requeue:
    """The job waits for ``at`` again; ``uncount`` gives the attempt back."""

    at: float
    error: Optional[str]
    uncount: bool = False


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


def decide(answer: object, attempt: int, opts: QueueOptions, now: float) -> Decision:
    """The decision for how an attempt ended: Retry, Snooze, Fail, Errored, or any other return (done)."""
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
    return Done(now + opts.dedupe if opts.dedupe > 0 else None)


def decide_lost(attempt: int, opts: QueueOptions, now: float) -> Decision:
    """The decision for an attempt whose lease ended without a settlement.

    The attempt stays counted (JOB-04), so a handler that kills its process
    every time still reaches ``attempts``; otherwise it runs again at once.
    """
    if attempt >= opts.attempts:
        return Failed(LOST_LEASE, now + opts.keep)
    return Requeue(now, LOST_LEASE)


def gives_work(settlements: list, stale: list, opts: QueueOptions) -> bool:
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
