"""W6 steps: the cost of ``run.step``: a handler with 3 steps against a no-op one.

Both drain a copy of the same template in one worker process (``child.py
drain``); the cost per step is the extra time divided by the steps kept.
Each step reads whether its answer is kept, then writes it through the
writer (group commit shares the commits among concurrent handlers).
"""

from __future__ import annotations

from common import Context, Row, ratio
from workloads.w2_drain import drain_copy, template

TITLE = "steps"


def run(ctx: Context) -> list[Row]:
    jobs, steps = ctx.sizes["w6_jobs"], ctx.sizes["w6_steps"]
    source = template(ctx, jobs)
    rows = []
    for kind in ("async", "sync"):
        plain = drain_copy(ctx, source, f"w6-{kind}-none", kind)
        stepped = drain_copy(ctx, source, f"w6-{kind}-steps", f"steps-{kind}", steps=steps)
        extra_s = stepped["seconds"] - plain["seconds"]
        per_step_us = extra_s / (jobs * steps) * 1e6
        commits = None
        if stepped["commits"] is not None and plain["commits"] is not None:
            commits = (stepped["commits"] - plain["commits"]) / (jobs * steps)
        rows.append(Row("W6", f"{kind} handler, {steps} steps vs none: cost per step", per_step_us, "us",
                        ratio(per_step_us / 1000, ctx.baseline["commit_ms"]), "one raw commit", "", None,
                        {"jobs": jobs, "steps": steps, "none_jobs_per_s": jobs / plain["seconds"],
                         "steps_jobs_per_s": jobs / stepped["seconds"], "extra_commits_per_step": commits,
                         "left": plain["left"] + stepped["left"]}))
    return rows
