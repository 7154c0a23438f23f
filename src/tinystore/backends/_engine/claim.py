"""Claiming due jobs in one write transaction: limits checked, attempts counted, leases taken.

The count of live leases and of starts in the rate windows is read in the
same transaction that takes new leases, and no other claim of a queue with
limits runs beside it (SQLite: the file's one writer; PostgreSQL: the
queue's advisory lock, held from before the counts are read until the
leases commit), so two processes never both take the last place
(LIM-01..03). On PostgreSQL the claims of a queue without limits run side
by side, each skipping the rows another holds (see ``postgres/_sql``). The
limits are the ones kept in the store, read in that transaction too: a
change made by any process binds the next claim. So does a pause, kept with
them: a paused queue's claim takes nothing (its cycle still settles and
ends the leases that ran out).

``claim`` is the one claim path: the queue's room, the groups woken, the
jobs picked in start order (``_pick``), taken (``take``), and their starts
counted. A driver whose every statement is a round trip takes the due jobs
of a queue without limits in one statement where no group is to be merged
(``Take``: the same start order, read from the same index). A job whose id or payload cannot be read (a file damaged under
it) fails for good in the claim that took it, with an error that says so:
one poison row never stops its queue.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections import Counter
from typing import Any, Callable, Iterable, Optional

from ..._events import fields
from ..._options import QueueOptions
from ..._values import PRIORITIES
from .._base import Claimed
from . import groups
from .executor import Executor, Later, Unreadable

log = logging.getLogger("tinystore.worker")


def claim(ex: Executor, queue: str, opts: QueueOptions, owner: int, want: int, now: float,
          early: Optional["Take"] = None) -> tuple[list[Claimed], Optional[float], Optional[Later]]:
    """Claim up to ``want`` due jobs in start order; also return when the rate window slides, if it is full,
    and where it was read with the claim, the read of the next times (``next_wake``). ``early``: a take sent
    before the options were read (``Take``): what it took was taken under the options it was sent with."""
    if early is not None and early.taken(ex):
        return early.taken(ex), None, early.times
    opts = groups.kept(ex, queue, opts)
    if opts.paused:  # read in this transaction: a pause kept before it binds it
        return [], None, None
    now = start_time(ex, queue, opts, now)
    room, slides = _queue_room(ex, queue, opts, now)
    want = min(want, room)
    if want <= 0:
        return [], slides, None
    if ex.takes_at_once and not limited(opts):
        judged = early is not None and not early.expired and early.options == ex.kept_options(queue)
        sent = early if early is not None and judged else Take(ex, queue, owner, want, now, opts.lease,
                                                               ex.kept_options(queue))
        if not sent.in_steps(ex):
            return sent.taken(ex), None, sent.times
    _wake_groups(ex, queue, opts, now)
    picked, read = _pick(ex, queue, opts, want, now)
    claimed = take(ex, queue, opts, owner, now, picked)
    taken = Counter(c.grp for c in claimed if c.grp is not None)
    if read:  # every group read, taken from or not, reads its head again: a wrong one is put right
        groups.update(ex, queue, opts, {grp: taken[grp] for grp in read})
    if claimed:
        _record_starts(ex, queue, opts, claimed, taken, now)
    return claimed, None, None


def limited(opts: QueueOptions) -> bool:
    """Whether a queue's claims count anything (LIM-01..03): their count and take must not run beside
    another claim of the queue."""
    return any(limit is not None for limit in (opts.concurrency, opts.rate, opts.group_concurrency,
                                               opts.group_rate))


class Take:
    """A claim of a queue without limits by a driver that takes in one statement (``take_due``), sent with
    the reads it is judged by: the groups a claim must merge, and the next times (one round trip).

    ``options``: the queue's options (text) it was judged by, read in this transaction or, for a take sent
    ``early`` (before they are read), the ones this process read last (``work.take_early``). It takes only
    where the options kept are still those, so nothing is taken under a limit or a pause set since; one
    sent early, only where no lease has run out (the jobs the cycle requeues are then among those it
    picks from).
    """

    def __init__(self, ex: Executor, queue: str, owner: int, want: int, now: float, lease: float,
                 options: Optional[str], early: bool = False):
        self.queue, self.now, self.options = queue, now, options
        self.woken = ex.ahead("groups_woken", (queue, math.inf))  # with no group_rate, all set aside by one
        self.grouped = ex.ahead("groups_priority_below", {"queue": queue, "above": max(PRIORITIES) + 1})
        self.rows = ex.ahead("take_due", {"queue": queue, "now": now, "want": want, "owner": owner,
                                          "expires": now + lease, "options": options, "early": early})
        self.times: Optional[Later] = ex.ahead("next_times", {"queue": queue})
        self.expired = False  # set where the cycle then ended leases that ran out: an early take took nothing
        self._claimed: Optional[list[Claimed]] = None

    def taken(self, ex: Executor) -> list[Claimed]:
        """The jobs it took, in start order; their starts counted."""
        if self._claimed is None:
            self._claimed = [ex.taken(row) for row in self.rows.all()]
            if self._claimed:
                ex.run("count_add", (self.queue, int(self.now // 60), len(self._claimed), 0, 0))
        return self._claimed

    def in_steps(self, ex: Executor) -> bool:
        """Whether the claim must run in steps: it took nothing, and groups are ready or wait to be woken."""
        return not self.taken(ex) and bool(self.woken.all() or self.grouped.row()[0] is not None)


def start_time(ex: Executor, queue: str, opts: QueueOptions, now: float) -> float:
    """The time a claim's starts count at: ``now``, where every start already counted is no later.

    A start counted later than ``now`` was counted by a clock that read
    later: this one before it was set back, another process's running ahead,
    or a caller that read the clock before it waited for the write lock. It
    counts as made now: never earlier than it was, so no window lets more
    starts through, and no window is held for longer than its period, so a
    clock set back an hour does not stop the queue for that hour. Likewise a
    group set aside until more than its window from now is woken, to count
    its window again. The starts stay in commit order, so pruning those
    older than the longest window never drops one that a window holds.
    """
    if opts.rate is None and opts.group_rate is None:
        return now
    ex.run("starts_clamp", {"now": now, "queue": queue})
    if opts.group_rate is not None:
        ex.run("groups_wake_clamp", {"now": now, "queue": queue, "window": opts.group_rate[1]})
    return now


def _queue_room(ex: Executor, queue: str, opts: QueueOptions, now: float) -> tuple[int, Optional[float]]:
    room, slides = 1 << 30, None
    if opts.concurrency is not None:
        room = opts.concurrency - ex.row("lease_count", (queue,))[0]
    if opts.rate is not None:
        count, period = opts.rate
        used, oldest = ex.row("starts_in_window", (queue, now - period))
        if used >= count:
            slides = oldest + period
        room = min(room, count - used)
    return room, slides


def _wake_groups(ex: Executor, queue: str, opts: QueueOptions, now: float) -> None:
    """Groups whose rate window slid get their room back; with no group_rate kept now, every group set aside by one."""
    until = now if opts.group_rate is not None else math.inf
    for (grp,) in ex.all("groups_woken", (queue, until)):
        groups.wake(ex, queue, grp, opts, now)


def _pick(ex: Executor, queue: str, opts: QueueOptions, want: int,
          now: float) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The first ``want`` due jobs the limits allow, as (priority, at, seq, grp) in start order (JOB-01),
    merging jobs without a group and ready groups; and the groups with room that were read.

    Only groups marked ready are read, highest priority first (a group's is its queued jobs' highest),
    then in the order of their first due job (their head), so the jobs waiting behind a full group are
    never scanned; each reads its due jobs by priority.
    """
    streams: list[Iterable[tuple[Any, ...]]] = [_due_ungrouped(ex, queue, want, now)]
    read: list[str] = []
    for grp, running, top in _ready_groups(ex, queue, want, now):
        room = want if opts.group_concurrency is None else opts.group_concurrency - running
        window, slides = groups.window_room(ex, queue, grp, opts, now)
        if room <= 0 or window <= 0:  # full under the limits kept now, or its window is used up: set aside
            groups.set_aside(ex, queue, grp, opts, slides if window <= 0 else None)
            continue
        read.append(grp)
        streams.append(_due_in_group(ex, queue, grp, top, min(room, window, want), now))
    return list(itertools.islice(heapq.merge(*streams, key=start_order), want)), read


def start_order(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The order due jobs (priority, at, seq, ...) start in: the highest priority first, then by time, then added."""
    return (-row[0], row[1], row[2])


def _by_priority(probe: Callable[[int], Optional[int]], read: Callable[[int, int], list[tuple[Any, ...]]],
                 top: Optional[int], want: int) -> list[tuple[Any, ...]]:
    """Up to ``want`` rows read priority by priority, highest first: ``read(priority, n)`` gives a priority's
    first n, ``probe(above)`` the next priority down where rows are (None where none). Starting at ``top``
    (where it is known) saves the first probe."""
    rows: list[tuple[Any, ...]] = []
    priority = top if top is not None else probe(max(PRIORITIES) + 1)
    while priority is not None:
        rows += read(priority, want - len(rows))
        if len(rows) >= want:
            break
        priority = probe(priority)
    return rows


def _due_ungrouped(ex: Executor, queue: str, want: int, now: float) -> list[tuple[Any, ...]]:
    """The first ``want`` due jobs without a group, in start order: each priority's due jobs come first in
    its index, so the jobs scheduled for later are never read."""
    return _by_priority(
        lambda above: ex.row("priority_below", {"queue": queue, "above": above})[0],
        lambda priority, n: ex.all("due_ungrouped", {"queue": queue, "priority": priority, "now": now, "want": n}),
        None, want)


def _ready_groups(ex: Executor, queue: str, want: int, now: float) -> list[tuple[Any, ...]]:
    """Up to ``want`` groups with room and a due head, as (grp, running, priority): the highest priority
    first, then by their head; the groups whose head is scheduled for later are never read."""
    return _by_priority(
        lambda above: ex.row("groups_priority_below", {"queue": queue, "above": above})[0],
        lambda top, n: ex.all("groups_ready", {"queue": queue, "top": top, "now": now, "want": n}),
        None, want)


def _due_in_group(ex: Executor, queue: str, grp: str, top: int, want: int, now: float) -> list[tuple[Any, ...]]:
    """A group's first ``want`` due jobs in start order, from its top priority down."""
    return _by_priority(
        lambda above: ex.row("group_priority_below", {"queue": queue, "grp": grp, "above": above})[0],
        lambda priority, n: ex.all("due_in_group", {"queue": queue, "grp": grp, "priority": priority,
                                                    "now": now, "want": n}),
        top, want)


def take(ex: Executor, queue: str, opts: QueueOptions, owner: int, now: float,
         picked: list[tuple[Any, ...]]) -> list[Claimed]:
    """Take the picked jobs still queued, each under a lease; in start order.

    A taken job that cannot be read fails for good here, its attempt counted, and takes no lease.
    Picked jobs the take did not find queued are the executor's to judge (``not_taken``): on
    SQLite, a due index listing a row its table no longer yields is damage, not a job to pick again.
    """
    if not picked:
        return []
    claimed: list[Claimed] = []
    unreadable: list[Unreadable] = []
    rows = ex.all("take", (ex.array([row[2] for row in picked]),))
    if len(rows) < len(picked):
        taken = {row[0] for row in rows}
        ex.not_taken(queue, [pick for pick in picked if pick[2] not in taken])
    for row in rows:
        try:
            claimed.append(ex.taken(row))
        except Unreadable as bad:
            unreadable.append(bad)
    if claimed:
        ex.run("lease_insert", (owner, now + opts.lease, ex.array([c.seq for c in claimed])))
    if unreadable:
        _fail_unreadable(ex, queue, opts, unreadable, now)
    order = {row[2]: n for n, row in enumerate(picked)}
    return sorted(claimed, key=lambda c: order[c.seq])


def _fail_unreadable(ex: Executor, queue: str, opts: QueueOptions, jobs: list[Unreadable], now: float) -> None:
    """Jobs whose id or payload cannot be read: each fails for good now, kept with an error that says why."""
    for bad in jobs:
        ex.run("job_fail", (bad.error, now + opts.keep, bad.seq))
        log.error("%s/%s attempt %d failed for good: %s", queue, bad.id, bad.attempt, bad.error,
                  extra=fields(queue, bad.id, bad.attempt, "failed"))
    ex.run("count_add", (queue, int(now // 60), 0, 0, len(jobs)))


def _record_starts(ex: Executor, queue: str, opts: QueueOptions, claimed: list[Claimed],
                   taken: Counter[str], now: float) -> None:
    """Count the starts for the rate windows; a group whose window they filled is set aside until it slides."""
    if opts.rate is not None or opts.group_rate is not None:
        ex.run("starts_insert", {"queue": queue, "t": now, "grps": ex.array([c.grp for c in claimed])})
        longest = max(p for _, p in filter(None, (opts.rate, opts.group_rate)))
        ex.run("starts_prune", (queue, now - longest))
    if opts.group_rate is not None:
        for grp in taken:
            window, slides = groups.window_room(ex, queue, grp, opts, now)
            if window <= 0:
                groups.set_aside(ex, queue, grp, opts, slides)
    ex.run("count_add", (queue, int(now // 60), len(claimed), 0, 0))


def next_wake(ex: Executor, queue: str, now: float, times: Optional[Later] = None) -> Optional[float]:
    """When a claim of this queue that left places free should look again.

    With no room in the queue, only a lease's end (a commit, which wakes the
    workers anyway), a lease running out or the rate window sliding can make
    some: looking again before that would be a busy loop of transactions.
    Otherwise: the next due time, a group's window sliding, a lease running out. A paused queue
    starts nothing: only a lease running out (ended by a cycle) or a notice (its resume) needs a look.
    ``times``: the read of the next times, where the claim sent it with its own (after its take).
    """
    opts = groups.kept(ex, queue, QueueOptions())
    if opts.paused:
        expires: Optional[float] = ex.row("next_times", {"queue": queue})[0]
        return expires
    room, slides = _queue_room(ex, queue, opts, start_time(ex, queue, opts, now))
    if times is None:
        times = ex.ahead("next_times", {"queue": queue})  # after the clamp
    expiry, ungrouped, group, group_wake = times.row()
    candidates = [expiry, slides] if room <= 0 else [ungrouped, group, group_wake, expiry]
    found = [t for t in candidates if t is not None]
    return min(found) if found else None
