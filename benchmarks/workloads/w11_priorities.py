"""W11 priorities: W2's async one-process drain with priorities in use, beside a backlog scheduled for later.

Each file holds W11's backlog (100,000 jobs at full size) scheduled for next
week and the due jobs added after it. In the reference every job has
priority 0. In the others the backlog and the due jobs are spread over W11's
priorities (10, from -45 to 45), so each claim reads the due jobs priority
by priority, past the jobs of every priority scheduled for later:

- "added in start order": the due jobs were added highest priority first, so
  the rows a claim takes and a settlement removes lie together as in the
  reference; the figure is what reading by priority costs a claim;
- "added interleaved": each next due job has the next priority, so a claim
  of one priority takes one row in ten: the jobs run out of the order they
  were added, and each commit writes ten times the pages (W4's raw row
  shows what that costs SQLite itself).

Each is the drain's rate against the reference's, run just before on the
same machine.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from common import WEEK, Context, Row, fill
from workloads.w2_drain import drain_copy, row

TITLE = "priorities"


def _file(ctx: Context, name: str, backlog_priority: Optional[Callable[[int], int]],
          due_priority: Optional[Callable[[int], int]]) -> str:
    path = ctx.path(name)
    fill(path, ctx.durability, ctx.sizes["w11_backlog"], at=time.time() + WEEK, batch=10_000, start=10_000_000,
         priority_of=backlog_priority)
    fill(path, ctx.durability, ctx.sizes["w11_jobs"], priority_of=due_priority)
    return path


def run(ctx: Context) -> list[Row]:
    jobs, backlog, levels = ctx.sizes["w11_jobs"], ctx.sizes["w11_backlog"], ctx.sizes["w11_priorities"]

    def spread(n: int) -> int:
        return (n % levels) * 10 - 45

    def in_start_order(n: int) -> int:
        return 45 - (n * levels // jobs) * 10

    rows = []
    plain: dict[str, Any] = {}
    cases = (("1 priority (all 0)", None, None),
             (f"{levels} priorities, added in start order", spread, in_start_order),
             (f"{levels} priorities, added interleaved", spread, spread))
    for n, (case, backlog_priority, due_priority) in enumerate(cases):
        source = _file(ctx, f"w11-{n}", backlog_priority, due_priority)
        measured = drain_copy(ctx, source, f"w11-{n}-run")
        ctx.remove(source)
        title = f"{jobs:,} jobs + {backlog:,} next week, {case}, async, 1 process"
        if not plain:
            plain = measured
            rows.append(row("W11", title, jobs, measured, ctx))
            reference = rows[-1].value
            continue
        r = row("W11", title, jobs, measured, ctx, reference=reference, vs="1 priority")
        if r.ratio is not None and r.met is None:
            r.target, r.met = ">= 0.9x 1 priority", r.ratio >= 0.9
        rows.append(r)
    return rows
