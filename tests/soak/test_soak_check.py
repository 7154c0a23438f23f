"""The soak's checker catches what it is for: each test feeds it a witness broken in one way.

A healthy little soak first (every invariant holds), then one break at a
time: a lost job, an overlap past a limit, a step run twice, an early
timeout, a done job run again, a process that died wrong, two live attempts
after one worker's PostgreSQL sessions were cut. And the cases the checker
must not flag: a stalled process's leases running out, a stale claim run
after the job was done, a store frozen by a stopped writer or by a server
restart, an answer lost to a cut of its process's sessions.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from soak_check import Bounds, check

T0 = 1_000_000.0


class Soak:
    """A witness, a supervisor's log and final states, written by hand."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.events: list[dict] = [{"ev": "soak_start", "t": T0}]
        self.finals: dict[str, dict] = {}
        self.procs: set[int] = set()
        self.tokens = 0
        self.kept: dict[tuple[str, str], str] = {}

    def proc(self, pid: int, role: str = "worker") -> None:
        if pid not in self.procs:
            self.procs.add(pid)
            self.events += [{"ev": "start", "t": T0 - 1, "pid": pid, "role": role},
                            {"ev": "ready", "t": T0 - 0.5, "pid": pid}]

    def event(self, kind: str, at: float, pid: int, **fields: Any) -> None:
        self.events.append({"ev": kind, "t": T0 + at, "pid": pid, **fields})

    def job(self, job: str, queue: str, plan: Optional[dict] = None, at: float = 0.0,
            state: Optional[str] = "done", attempt: int = 1, error: Optional[str] = None) -> None:
        self.proc(99, "producer")
        self.records += [
            {"ev": "adding", "t": T0 + at, "pid": 99, "id": job, "q": queue, "plan": plan or {"ms": [10]}},
            {"ev": "added", "t": T0 + at + 0.001, "pid": 99, "id": job, "q": queue}]
        if state is not None:
            self.finals[job] = {"queue": queue, "state": state, "attempt": attempt, "attempts": 20, "error": error}

    def run(self, pid: int, queue: str, job: str, attempt: int, begin: float, end: Optional[float],
            outcome: str = "ok", kind: str = "async", group: Optional[str] = None,
            steps: tuple = ("s0",), rerun: tuple = (), keep: bool = True, cancel_at: Optional[float] = None,
            flag: bool = False, slow: bool = False) -> dict:
        """One run. A step kept before gives its answer back, unless named in ``rerun`` (its fn runs
        again: the bug); a new answer is kept unless ``keep`` is false (its lease was gone)."""
        self.proc(pid)
        base = {"pid": pid, "q": queue, "id": job, "a": attempt}
        self.records.append({"ev": "begin", "t": T0 + begin, "grp": group, "kind": kind, **base})
        answers = {}
        t = begin + 0.001
        for name in steps:
            self.records.append({"ev": "step_call", "t": T0 + t, "name": name, **base})
            tok = self.kept.get((job, name))
            if tok is None or name in rerun:
                self.tokens += 1
                tok = f"tok{self.tokens}"
                self.records.append({"ev": "step_fn", "t": T0 + t + 0.0005, "name": name, "tok": tok, **base})
                if not keep:
                    outcome = "conflict"
                    break
                self.kept.setdefault((job, name), tok)
            self.records.append({"ev": "step_ans", "t": T0 + t + 0.001, "name": name, "tok": tok, **base})
            answers[name] = tok
            t += 0.002
        if slow:
            self.records.append({"ev": "slow", "t": T0 + t, **base})
        if cancel_at is not None:
            self.records.append({"ev": "cancel", "t": T0 + cancel_at, "elapsed": cancel_at - begin, "flag": flag,
                                 "via": "CancelledError" if kind == "async" else "flag", **base})
        if end is not None:
            self.records.append({"ev": "end", "t": T0 + end, "outcome": outcome, "elapsed": end - begin,
                                 "lag": 0.0, **base})
        return answers

    def check(self, **kwargs: Any):
        self.records.sort(key=lambda r: r["t"])
        self.events.sort(key=lambda e: e["t"])
        return check(self.records, self.events, self.finals, **kwargs)


def failing(result) -> set[int]:
    return {i.number for i in result.violated()}


def assert_holds(s: Soak) -> None:
    result = s.check()
    assert result.ok, result.report()


def healthy() -> Soak:
    """Jobs in every kind of queue, done, with a retry, a kill (its job taken over), a stop, a SIGTERM."""
    s = Soak()
    s.job("a1", "aio")
    s.run(1, "aio", "a1", 1, 0.1, 0.3)
    s.job("c1", "conc")
    s.job("c2", "conc")
    s.job("c3", "conc")
    for n, job in enumerate(("c1", "c2", "c3")):
        s.run(1 + n % 2, "conc", job, 1, 1.0 + n * 0.01, 1.5)
    s.job("r1", "thr", {"ms": [10], "raise": [1]}, attempt=2)
    s.run(2, "thr", "r1", 1, 2.0, 2.1, outcome="raise", kind="def")
    s.run(2, "thr", "r1", 2, 2.3, 2.4, kind="def")
    # pid 3 is killed while it runs k1; pid 1 runs it again, its kept step given back.
    s.job("k1", "aio", {"ms": [10, 10]}, attempt=2)
    s.run(3, "aio", "k1", 1, 3.0, None, steps=("s0",))
    s.event("kill", 3.05, 3)
    s.event("exit", 3.06, 3, rc=-9)
    s.run(1, "aio", "k1", 2, 3.2, 3.3, steps=("s0", "s1"))
    # A timeout that was reached: cancelled after 1 s, done on the next attempt.
    s.job("t1", "tmo_async", {"ms": [10, 10], "slow": [1]}, attempt=2)
    s.run(1, "tmo_async", "t1", 1, 4.0, 5.001, outcome="cancelled", cancel_at=5.001, slow=True)
    s.run(2, "tmo_async", "t1", 2, 5.2, 5.3)
    # pid 2 gets SIGTERM and exits 0; rate jobs; group jobs one after another.
    s.event("term", 6.0, 2)
    s.event("exit", 6.3, 2, rc=0)
    for n in range(20):
        s.job(f"q{n}", "rate")
        s.run((1, 4, 10)[n // 8], "rate", f"q{n}", 1, 7.0 + n * 0.01, 7.5)
    for n in range(3):
        s.job(f"g{n}", "grp")
        s.run(1, "grp", f"g{n}", 1, 8.0 + n * 0.2, 8.15 + n * 0.2, kind="def", group="g01")
    # The end (the tests below add runs before it): faults off, every process stopped.
    s.event("faults_end", 39.0, None)
    s.event("term", 39.0, 99, final=True)
    s.event("exit", 39.01, 99, rc=0)
    for pid in (1, 4, 10):
        s.event("term", 40.0, pid, final=True)
        s.event("exit", 40.2, pid, rc=0)
    return s


def test_a_healthy_soak_holds():
    assert_holds(healthy())


def counted(s: Soak) -> dict[str, dict]:
    """What stats() says when it counts what the finals list."""
    stats: dict[str, dict] = {}
    for f in s.finals.values():
        entry = stats.setdefault(f["queue"], {"scheduled": 0, "waiting": 0, "running": 0, "done": 0, "failed": 0})
        entry[f["state"]] += 1
    return stats


def test_stats_that_count_what_the_store_lists_hold_and_stats_that_miss_a_job_are_caught():
    s = healthy()
    assert s.check(stats=counted(s)).ok
    off = counted(s)
    off["aio"]["done"] -= 1
    result = s.check(stats=off)
    assert failing(result) == {7}
    assert "aio" in result.invariants[6].violations[0]


def test_a_lost_job_is_caught():
    s = healthy()
    s.job("lost", "aio", state=None)
    assert failing(s.check()) == {1}


def test_a_job_still_waiting_or_failed_against_its_plan_is_caught():
    s = healthy()
    s.job("w", "aio", state="waiting", attempt=0)
    s.job("f", "aio", state="failed", attempt=1, error="ValueError: boom")
    s.run(1, "aio", "f", 1, 0.5, 0.6, outcome="raise")
    result = s.check()
    assert failing(result) == {1}
    assert len(result.invariants[0].violations) == 2


def test_an_overlap_past_concurrency_is_caught():
    s = healthy()
    s.job("c4", "conc")
    s.run(2, "conc", "c4", 1, 1.2, 1.3)  # a fourth run while c1..c3 run: concurrency=3
    result = s.check()
    assert failing(result) == {3}
    assert "concurrency=3" in result.report()


def test_an_overlap_of_a_stopped_process_is_left_out():
    s = healthy()
    s.event("stop", 1.1, 2)
    s.event("cont", 1.45, 2)
    s.job("c4", "conc")
    s.run(1, "conc", "c4", 1, 1.2, 1.3)  # pid 2's runs may have lost their leases while it was stopped
    assert_holds(s)


def test_an_overlap_in_a_group_is_caught():
    s = healthy()
    s.job("g9", "grp")
    s.run(2, "grp", "g9", 1, 8.1, 8.12, kind="def", group="g01")
    assert failing(s.check()) == {3}


def test_a_def_handler_past_its_timeout_keeps_its_place_until_its_thread_returns():
    s = healthy()
    s.job("z", "tmo_def", {"ms": [10, 10], "slow": [1]}, state="done", attempt=2)
    s.run(1, "tmo_def", "z", 1, 10.0, 12.0, kind="def", slow=True)  # timed out at 11.0, thread returns at 12.0
    s.run(2, "tmo_def", "z", 2, 11.2, 11.3, kind="def")
    s.job("o", "tmo_def")
    s.run(2, "tmo_def", "o", 1, 11.25, 11.9, kind="def")  # with z's thread and z's second attempt: 3 > 2
    result = s.check()
    assert failing(result) == {3}
    assert "tmo_def: 3 runs at once" in result.report()


def test_more_starts_than_the_rate_is_caught():
    s = healthy()
    s.job("q20", "rate")
    s.run(2, "rate", "q20", 1, 7.3, 7.4)  # 21 begins within 0.7 s: rate=20/s
    assert failing(s.check()) == {3}


def test_two_handlers_of_a_rate_limited_queue_that_begin_at_the_same_instant_are_checked_like_any_others():
    s = healthy()
    for pid, job in ((1, "tied-1"), (4, "tied-2")):
        s.job(job, "rate")
        s.run(pid, "rate", job, 1, 9.0, 9.5)  # the same begin time, to the microsecond, in two processes
    assert failing(s.check()) == set()


def test_two_live_attempts_of_one_job_are_caught():
    s = healthy()
    s.job("two", "aio", attempt=2)
    s.run(1, "aio", "two", 1, 12.0, 12.5, outcome="raise")
    s.run(2, "aio", "two", 2, 12.2, 12.3)
    assert failing(s.check()) == {3}


def test_a_kept_step_run_again_is_caught():
    s = healthy()
    s.job("st", "aio", {"ms": [10, 10], "raise": [1]}, attempt=2)
    s.run(1, "aio", "st", 1, 13.0, 13.1, outcome="raise", steps=("s0",))
    s.run(2, "aio", "st", 2, 13.5, 13.6, steps=("s0", "s1"), rerun=("s0",))  # s0's fn again: it was kept
    result = s.check()
    assert failing(result) == {4}
    assert "although its answer" in result.report()


def test_a_stale_claim_run_after_the_job_was_done_may_run_its_steps():
    s = healthy()
    s.job("late", "tmo_async", {"ms": [10], "snooze": True}, attempt=2)
    s.run(1, "tmo_async", "late", 1, 13.0, 13.01, outcome="snooze", steps=("snz",))
    s.event("stop", 13.25, 2)   # pid 2 claimed it (attempt 1 again), then was stopped
    s.event("cont", 16.0, 2)
    s.run(1, "tmo_async", "late", 2, 15.3, 15.4, steps=("snz", "s0"))
    s.kept.clear()  # done: its steps were dropped with it
    s.run(2, "tmo_async", "late", 1, 16.01, 16.02, steps=("snz",), keep=False)
    assert_holds(s)


def test_different_answers_for_one_step_are_caught():
    s = healthy()
    s.job("d", "aio", attempt=2)
    s.run(1, "aio", "d", 1, 14.0, 14.1, outcome="raise", steps=("s0",))
    s.run(2, "aio", "d", 2, 14.05, 14.2, steps=("s0",), rerun=("s0",))  # its own answer, not the kept one
    assert 4 in failing(s.check())


def test_an_early_timeout_is_caught():
    s = healthy()
    s.job("e", "tmo_async", attempt=2)
    s.run(1, "tmo_async", "e", 1, 15.0, 15.5, outcome="cancelled", cancel_at=15.5)
    s.run(1, "tmo_async", "e", 2, 15.7, 15.8)
    result = s.check()
    assert failing(result) == {5}
    assert "before its timeout of 1s" in result.report()


def test_a_cancel_of_a_stopped_process_is_no_early_timeout():
    s = healthy()
    s.event("stop", 15.1, 1)
    s.event("cont", 18.0, 1)
    s.job("e", "tmo_async", attempt=2)
    s.run(1, "tmo_async", "e", 1, 15.0, 18.01, outcome="cancelled", cancel_at=18.01, flag=True)
    s.run(2, "tmo_async", "e", 2, 17.2, 17.3)
    assert_holds(s)


def test_a_fast_job_failed_by_timeout_is_caught():
    s = healthy()
    s.job("ft", "tmo_def", {"ms": [100]}, state="failed", attempt=1, error="timeout: the handler ran past")
    s.run(1, "tmo_def", "ft", 1, 16.0, 16.2, kind="def")
    assert 5 in failing(s.check())


def test_a_handler_never_stopped_at_its_timeout_is_caught():
    s = healthy()
    s.job("slow", "tmo_async", {"ms": [10], "slow": [1]})
    s.run(1, "tmo_async", "slow", 1, 17.0, 19.1, slow=True)  # ran 2.1 s and was settled done
    result = s.check()
    assert failing(result) == {5}
    assert "ran 2.100s, past its timeout" in result.report()


def test_a_done_job_run_again_is_caught():
    s = healthy()
    s.job("again", "aio", attempt=1)
    s.run(1, "aio", "again", 1, 18.0, 18.1)
    s.run(1, "aio", "again", 2, 18.3, 18.4)
    assert 2 in failing(s.check())


def test_an_ok_return_lost_without_a_fault_is_caught():
    s = healthy()
    s.job("lostok", "thr", attempt=2)
    s.run(1, "thr", "lostok", 1, 19.0, 19.1, kind="def")
    s.run(1, "thr", "lostok", 2, 19.5, 19.6, kind="def")
    result = s.check()
    assert failing(result) == {2}
    assert "returned OK and no kill, stop or SIGTERM" in result.report()


def test_an_ok_return_lost_to_a_kill_soon_after_is_allowed():
    s = healthy()
    s.job("lostok", "thr", attempt=2)
    s.run(11, "thr", "lostok", 1, 19.0, 19.1, kind="def")
    s.event("kill", 19.101, 11)
    s.event("exit", 19.11, 11, rc=-9)
    s.run(1, "thr", "lostok", 2, 19.5, 19.6, kind="def")
    assert_holds(s)


def test_an_async_answer_just_past_its_timeout_ignored_and_the_job_run_again_is_allowed():
    # The loop was late to cancel it (a loaded machine): the answer came past the timeout, so the store
    # ignored it (JOB-09) and ran the job again.
    s = healthy()
    s.job("past", "tmo_async", {"ms": [400, 300]}, attempt=2)
    s.run(1, "tmo_async", "past", 1, 17.0, 18.016, steps=("s0", "s1"))
    s.run(1, "tmo_async", "past", 2, 18.1, 18.11, steps=("s0", "s1"))
    assert_holds(s)


@pytest.mark.parametrize("held", [True, False])
def test_a_store_frozen_by_a_stopped_writer_excuses_the_leases_it_ran_out(held):
    s = healthy()
    s.proc(5)
    s.event("stop", 20.0, 5)
    s.event("stop_lock", 20.01, 5, held=held)
    s.event("cont", 23.0, 5)
    s.event("kill", 24.0, 5)
    s.event("exit", 24.01, 5, rc=-9)
    s.job("fz", "aio", attempt=2)
    s.run(1, "aio", "fz", 1, 19.8, 19.99)   # its settlement waited for the write lock until 23.0
    s.run(2, "aio", "fz", 2, 23.1, 23.2)
    assert failing(s.check()) == (set() if held else {2})


def test_process_counts_that_do_not_add_up_are_caught():
    s = healthy()
    s.proc(6)
    s.event("kill", 25.0, 6)
    s.event("exit", 25.01, 6, rc=0)         # SIGKILLed, yet exited 0
    s.proc(7)
    s.event("term", 25.0, 7)
    s.event("exit", 25.5, 7, rc=1)          # SIGTERMed, exited 1
    s.proc(8)
    s.event("died", 26.0, 8, rc=1)          # on its own
    result = s.check()
    assert failing(result) == {6}
    assert len(result.invariants[5].violations) == 3


def test_a_slow_exit_after_sigterm_is_caught():
    s = healthy()
    s.proc(6)
    s.event("term", 25.0, 6)
    s.event("exit", 36.0, 6, rc=0)
    assert failing(s.check(bounds=Bounds(exit_margin=5.0))) == {6}


def test_a_late_answer_settled_done_is_caught_however_slightly_late():
    s = healthy()
    s.job("late1", "tmo_async", {"ms": [400, 300]})
    s.run(1, "tmo_async", "late1", 1, 17.0, 18.11, steps=("s0", "s1"))  # 1.11 s: its cancel came too late
    result = s.check()
    assert failing(result) == {5}
    assert "answered after its timeout" in result.report()
    assert "was not stopped" not in result.report()  # a cancel up to 0.5 s late is the loop's, not a bug


# PostgreSQL's faults: sessions cut, the server restarted.


def test_an_ok_return_lost_to_a_cut_of_its_sessions_soon_after_is_allowed_and_to_another_workers_cut_is_not():
    s = healthy()
    s.job("cutok", "thr", attempt=2)
    s.run(1, "thr", "cutok", 1, 19.0, 19.1, kind="def")
    s.event("cut", 19.101, 4)  # another worker's sessions: pid 1's settlement was not in flight there
    s.run(1, "thr", "cutok", 2, 19.5, 19.6, kind="def")
    assert failing(s.check()) == {2}
    s.event("cut", 19.102, 1)  # its own: the settlement in flight may have been lost
    assert_holds(s)
    s = healthy()
    s.job("cutall", "thr", attempt=2)
    s.run(1, "thr", "cutall", 1, 19.0, 19.1, kind="def")
    s.event("cut_all", 19.101, None)
    s.run(1, "thr", "cutall", 2, 19.5, 19.6, kind="def")
    assert_holds(s)


def test_two_live_attempts_right_after_a_cut_of_one_workers_sessions_are_caught():
    # Its leases hold through the cut (it reconnects at once): another process must not take its job.
    s = healthy()
    s.job("cut1", "aio", attempt=2)
    s.run(2, "aio", "cut1", 1, 12.0, 12.5, outcome="conflict")
    s.event("cut", 12.1, 2)
    s.run(1, "aio", "cut1", 2, 12.2, 12.3)
    result = s.check()
    assert failing(result) == {3}
    assert "two attempts ran at once" in result.report()


@pytest.mark.parametrize("away", [0.3, 2.0])
def test_a_restart_that_kept_the_server_away_long_enough_excuses_the_leases_it_ran_out(away):
    s = healthy()
    s.event("restart", 20.0, None, mode="immediate")
    s.event("restarted", 20.0 + away, None, mode="immediate")
    s.job("rs", "conc", attempt=2)
    s.run(1, "conc", "rs", 1, 19.8, 23.0, outcome="cancelled", cancel_at=23.0)  # its lease could not be renewed
    s.run(4, "conc", "rs", 2, 22.9, 23.2)
    result = s.check()
    # A server away 0.3 s let no lease run out: the overlap and the early cancel are the store's.
    assert failing(result) == (set() if away >= 0.5 else {3, 5})
    assert "server restarts" in result.report()
