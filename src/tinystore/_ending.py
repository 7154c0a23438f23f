"""What an attempt's end means: the answer it gave, the decision for its job, and its line in the log.

The runner hands over how the handler ended (what it returned or raised,
and the worker's record of the attempt); ``answer_of`` says what that
counts as, ``decision_of`` turns it into the settlement's decision through
``_settle``, and ``log_outcome`` writes its line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import traceback
from types import TracebackType
from typing import Any, Optional

from ._answers import Fail, Retry, Snooze
from ._attempt import Attempt
from ._errors import InvalidArgument
from ._events import fields
from ._options import QueueOptions
from ._settle import Decision, Done, Errored, Requeue, decide, lost, outcome, repeating, rule_of
from ._typed import Unfit
from ._values import encode_json, from_timestamp
from .backends._base import Claimed

log = logging.getLogger("tinystore.worker")

NO_SETTLEMENT = object()  # the attempt lost its lease: whatever it answered settles nothing
LOST = object()  # it was stopped past the grace period: the next attempt takes over


PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def describe(exc: BaseException) -> str:
    """An attempt's error: the exception's type and message, then its traceback from the handler on."""
    tb = "".join(traceback.format_exception(type(exc), exc, from_handler(exc.__traceback__)))
    return f"{type(exc).__name__}: {exc}\n{tb}"


def from_handler(tb: Optional[TracebackType]) -> Optional[TracebackType]:
    """``tb`` without its first frames of tinystore's own (the worker's, which called the handler): it
    begins at the handler. Where every frame is tinystore's, all of them."""
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename.startswith(PACKAGE):
        first = first.tb_next
    return first or tb


def answer_of(queue: str, a: Attempt, answer: Any, exc: Optional[BaseException], timeout: Optional[float]) -> Any:
    """What the attempt answered, given what its handler returned (``answer``) or raised (``exc``)."""
    if (a.timed_out is None and not a.taken_away and timeout is not None and a.began is not None
            and a.finished is not None and a.finished - a.began >= timeout):
        a.timed_out = timeout  # it ended past its timeout before the timer could stop it (a busy loop)
    if a.timed_out is not None:  # whatever it answered late, the attempt failed by its timeout (JOB-09)
        return Errored(f"timeout: the handler ran past the queue's timeout of {a.timed_out:g}s")
    if a.taken_away:
        return NO_SETTLEMENT  # cancelled (JOB-12), or its lease ran out
    if isinstance(exc, asyncio.CancelledError):
        return LOST
    if isinstance(exc, Unfit):
        return Fail(f"{exc} (queue {queue!r}, job {a.claimed.id!r})")  # it will not fit on any attempt
    if exc is not None:
        # SystemExit and KeyboardInterrupt too: a worker stops on SIGTERM and SIGINT, which serve()
        # handles, never on what a handler raises
        return Errored(describe(exc))
    return answer


def decision_of(queue: str, c: Claimed, answer: Any, options: QueueOptions, now: float) -> tuple[Any, Any]:
    """The decision for an attempt's answer (and the answer, where its result turned it into an error): a
    result that is not JSON, or over 1 MiB, fails the attempt as a raise would; a repeating job waits for
    its rule's next time."""
    decision: Decision
    if answer is LOST:
        decision = lost(now)
    else:
        result = None
        if answer is not None and not isinstance(answer, (Retry, Snooze, Fail, Errored)):
            try:
                result = encode_json(answer, "the handler's result", queue, c.id)
            except InvalidArgument as exc:
                answer = Errored(f"{type(exc).__name__}: {exc}")
        decision = decide(answer, c.attempt, options, now, result)
    rule = rule_of(c.repeat)
    return answer, (repeating(decision, rule, c.at, now) if rule is not None else decision)


def log_outcome(queue: str, c: Claimed, attempts: int, answer: Any, exc: Optional[BaseException], decision: Any,
                now: float, took: float) -> None:
    """A line per attempt's end: debug when it is done, snoozed or asked to run again (``_report`` counts
    those), warning when it failed and runs again, error when it failed for good."""
    if isinstance(decision, Done) or (isinstance(decision, Requeue) and decision.reset and decision.error is None) \
            or isinstance(answer, (Snooze, Retry)):
        if not log.isEnabledFor(logging.DEBUG):
            return
    where = fields(queue, c.id, c.attempt, outcome(decision), took)
    head = f"{queue}/{c.id} attempt {c.attempt}"
    if isinstance(decision, Done):
        log.debug("%s done in %.3fs", head, took, extra=where)
        return
    reason = (decision.error or "").split("\n", 1)[0]
    trace = exc if isinstance(exc, Exception) else None
    if isinstance(decision, Requeue) and decision.reset:  # a repeating job, waiting for its next time
        if decision.error is None:
            log.debug("%s done in %.3fs; runs again at %s", head, took, from_timestamp(decision.at).isoformat(),
                      extra=where)
        else:
            log.error("%s failed after %.3fs: %s; runs again at its next time, %s", head, took, reason,
                      from_timestamp(decision.at).isoformat(), extra=where, exc_info=trace)
    elif isinstance(answer, Snooze):
        log.debug("%s snoozed after %.3fs: runs again in %gs", head, took, answer.delay, extra=where)
    elif isinstance(decision, Requeue) and isinstance(answer, Retry):
        log.debug("%s asked to run again after %.3fs: runs again in %.3fs", head, took,
                  max(0.0, decision.at - now), extra=where)
    elif isinstance(decision, Requeue):
        log.warning("%s failed after %.3fs, runs again in %.3fs: %s", head, took, max(0.0, decision.at - now),
                    reason, extra=where, exc_info=trace)
    else:
        log.error("%s failed for good after %.3fs (attempt %d of %d): %s", head, took, c.attempt,
                  attempts, reason, extra=where, exc_info=trace)
