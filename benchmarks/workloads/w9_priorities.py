"""W9 priorities: W2's async one-process drain with priorities in use, beside a backlog scheduled for later.

Both files hold W9's backlog (100,000 jobs at full size) scheduled for next
week and the due jobs added after it. In the reference every job has
priority 0; in the measured file the backlog and the due jobs are spread
over W9's priorities (10, from -45 to 45), so each claim reads the due jobs
priority by priority, past the jobs of every priority scheduled for later.
The figure is the drain's rate against the reference's, run just before on
the same machine: a claim's cost must not grow with how many priorities are
in use, nor with the backlog.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from common import WEEK, Context, Row, fill
from workloads.w2_drain import drain_copy, row

TITLE = "priorities"


def _file(ctx: Context, name: str, priority_of: Optional[Callable[[int], int]]) -> str:
    path = ctx.path(name)
    fill(path, ctx.durability, ctx.sizes["w9_backlog"], at=time.time() + WEEK, batch=10_000, start=10_000_000,
         priority_of=priority_of)
    fill(path, ctx.durability, ctx.sizes["w9_jobs"], priority_of=priority_of)
    return path


def run(ctx: Context) -> list[Row]:
    jobs, backlog, levels = ctx.sizes["w9_jobs"], ctx.sizes["w9_backlog"], ctx.sizes["w9_priorities"]

    def spread(n: int) -> int:
        return (n % levels) * 10 - 45

    rows = []
    plain: dict[str, Any] = {}
    for case, priority_of in (("1 priority (all 0)", None), (f"{levels} priorities", spread)):
        source = _file(ctx, f"w9-{case.split()[0]}", priority_of)
        measured = drain_copy(ctx, source, f"w9-{case.split()[0]}-run")
        ctx.remove(source)
        title = f"{jobs:,} jobs + {backlog:,} next week, {case}, async, 1 process"
        if not plain:
            plain = measured
            rows.append(row("W9", title, jobs, measured, ctx))
            reference = rows[-1].value
            continue
        r = row("W9", title, jobs, measured, ctx, reference=reference, vs="1 priority")
        if r.ratio is not None and r.met is None:
            r.target, r.met = ">= 0.9x 1 priority", r.ratio >= 0.9
        rows.append(r)
    return rows
