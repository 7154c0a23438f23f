"""W4 flat cost: W2's async one-process drain again, with a big backlog and with many groups.

- backlog: the file also holds W4's backlog (1,000,000 jobs at full size)
  scheduled for next week, added with ``add_many`` by 10,000 (the time it took
  is reported). The due jobs are added after it.
- groups: ``group_concurrency=1``; W4's groups (10,000) each hold one job
  for next week, and of the due jobs 90% are in one group ("hot") and the
  rest spread over the other groups. The hot group can run one job at a time,
  so the figure is the rate of the jobs outside it (they must not wait behind
  it): the worker (``child.py groups``) serves until they have all run; the
  hot jobs run meanwhile are reported beside it, and the hot group's rate
  alone in the 2 s after (one job at a time: a claim and a settlement each).

Each compares with W2's async one-process drain of the same size, run again
here just before (so that both see the same machine), and the worker's peak
RSS with that drain's (it must not grow with the backlog).
"""

from __future__ import annotations

import time
from typing import Any

from common import WEEK, Context, Row, best_of, fill, finish, ratio, read_json, read_line, say, start_child
from workloads.w2_drain import drain_copy, row, template

TITLE = "flat cost"
HOT = "hot"
RSS_SLACK_MIB = 5.0  # the peak RSS may differ from W2's by this much, or 10%, without "growing"


def _backlog(ctx: Context) -> tuple[str, float]:
    key = "w4-backlog"
    if key not in ctx.templates:
        path = ctx.path(key)
        seconds = fill(path, ctx.durability, ctx.sizes["w4_backlog"], at=time.time() + WEEK, batch=10_000,
                       start=10_000_000)
        ctx.templates[key] = path
        ctx.templates[key + "-seconds"] = seconds
    return ctx.templates[key], ctx.templates[key + "-seconds"]


def _groups_file(ctx: Context, jobs: int) -> tuple[str, int]:
    """A store with the groups (each one job next week) and ``jobs`` due jobs, 90% in the hot group."""
    path = ctx.path(f"w4-groups-{jobs}")
    groups = ctx.sizes["w4_groups"]
    fill(path, ctx.durability, groups - 1, at=time.time() + WEEK, group_of=lambda n: f"g{n - 20_000_000}",
         queue_options={"group_concurrency": 1}, start=20_000_000)
    fill(path, ctx.durability, 1, at=time.time() + WEEK, group_of=lambda n: HOT, start=30_000_000)
    every = round(1 / (1 - ctx.sizes["w4_hot"]))  # 1 job in 10 outside the hot group

    def group_of(n: int) -> str:
        return f"g{(n // every) % (groups - 1)}" if n % every == 0 else HOT
    fill(path, ctx.durability, jobs, group_of=group_of)
    others = sum(1 for n in range(jobs) if n % every == 0)
    return path, others


def _serve_groups(ctx: Context, source: str, others: int) -> dict[str, Any]:
    """Serve a copy of ``source`` until the jobs outside the hot group ran (best of ``ctx.repeat``)."""
    def once() -> dict[str, Any]:
        path = ctx.copy(source, "w4-groups-run")
        child = start_child("groups", path, "--durability", ctx.durability, "--hot", HOT, "--others", str(others),
                            "--hot-seconds", str(ctx.sizes["w4_hot_seconds"]))
        try:
            read_line(child, "ready", timeout=120)
            say(child, "go")
            got = read_json(child)
        finally:
            finish(child)
            ctx.remove(path)
        return {**got, "seconds": got["ended"] - got["began"]}
    return best_of(ctx, once)


def _rss_note(peak: float | None, w2_peak: float | None) -> tuple[str, bool | None]:
    if peak is None or w2_peak is None:
        return "", None
    grown = peak - w2_peak
    return f"{peak:.1f} MiB vs W2 {w2_peak:.1f}", grown <= max(RSS_SLACK_MIB, 0.1 * w2_peak)


def _raw_scattered(ctx: Context, jobs: int) -> Row:
    """The raw baseline on the groups case's layout: claim-update and delete 1 row in 10, against every row."""
    every = round(1 / (1 - ctx.sizes["w4_hot"]))
    spread, packed = ctx.target.raw_scattered(jobs, every, ctx.durability)
    case = f"  {ctx.target.raw_label}: update + delete of 1 row in {every} vs every row, 200/txn"
    return Row("W4", case, spread, "jobs/s", ratio(spread, packed), "every row", "", None,
               {"every_row_per_s": packed})


def run(ctx: Context) -> list[Row]:
    rows = []
    backlog, built = _backlog(ctx)
    rows.append(Row("W4", f"backlog build, {ctx.sizes['w4_backlog']:,} jobs by add_many(10,000)",
                    ctx.sizes["w4_backlog"] / built, "jobs/s", extra={"seconds": built}))
    for jobs in ctx.sizes["w2_jobs"]:
        plain = drain_copy(ctx, template(ctx, jobs), f"w4-plain-{jobs}")
        rows.append(row("W4", f"{jobs:,} jobs, async, 1 process (W2 again, the reference)", jobs, plain, ctx))
        w2_rate, w2_peak = rows[-1].value, plain["peak_rss_mib"]

        with_backlog = ctx.copy(backlog, f"w4-backlog-{jobs}")
        fill(with_backlog, ctx.durability, jobs)
        measured = drain_copy(ctx, with_backlog, f"w4-backlog-{jobs}-run")
        ctx.remove(with_backlog)
        r = row("W4", f"{jobs:,} jobs + {ctx.sizes['w4_backlog']:,} next week, async, 1 process", jobs, measured,
                ctx, reference=w2_rate, vs="W2 again")
        note, rss_ok = _rss_note(measured["peak_rss_mib"], w2_peak)
        r.extra["rss"] = note
        if r.ratio is not None and r.met is None:
            r.target, r.met = ">= 0.9x W2; RSS flat", r.ratio >= 0.9 and rss_ok is not False
        rows.append(r)

        grouped, others = _groups_file(ctx, jobs)
        got = _serve_groups(ctx, grouped, others)
        ctx.remove(grouped)
        rate = others / got["seconds"]
        note, rss_ok = _rss_note(got["peak_rss_mib"], w2_peak)
        met = None if w2_rate is None else rate >= 0.9 * w2_rate and rss_ok is not False
        rows.append(Row("W4", f"{jobs:,} jobs, {ctx.sizes['w4_groups']:,} groups, 90% in one (gc=1): the other "
                        f"{others:,}", rate, "jobs/s", ratio(rate, w2_rate), "W2 again", ">= 0.9x W2; RSS flat", met,
                        {"others": others, "seconds": got["seconds"], "runs_seconds": got["runs_seconds"],
                         "hot_run_meanwhile": got["hot"], "hot_per_s_meanwhile": got["hot"] / got["seconds"],
                         "commits": got["commits"], "peak_rss_mib": got["peak_rss_mib"], "rss": note}))
        alone = got["hot_alone"] / got["hot_alone_seconds"]
        rows.append(Row("W4", "  then the hot group alone (gc=1: one job at a time)", alone, "jobs/s",
                        extra={"jobs": got["hot_alone"], "seconds": got["hot_alone_seconds"]}))
        rows.append(_raw_scattered(ctx, others))
    return rows
