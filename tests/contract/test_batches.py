"""Contract tests of batches (BAT-*), on every backend.

A batch collects jobs of any queues; once it is closed and every job of it
has ended (done, failed for good, or cancelled), its then job is added
exactly once, with ``"batch": {"id", "done", "failed", "cancelled"}``
beside its own payload's keys. Time is a FakeClock the tests move; the
then job's handler appends what it got to a witness list.
"""

from __future__ import annotations

import threading

import pytest

import tinystore
from helpers import run_child, run_until_idle

WAIT = 30


def then_witness(q: tinystore.Queue) -> list:
    got: list = []
    q.work(lambda payload, run: got.append((run.id, payload)))
    return got


def by_outcome(payload, run):
    """A crawl handler: a job ends as its payload says."""
    if payload.get("fail"):
        return run.fail("told to fail")
    return None


def test_BAT_01_the_then_job_runs_once_after_every_job_ended_done_failed_or_cancelled_with_the_counts(store):
    crawl = store.queue("crawl", attempts=1)
    mailer = store.queue("mailer")
    got = then_witness(mailer)
    batch = store.batch(then=(mailer, {"report": "weekly"}))
    for page in range(5):
        crawl.add({"page": page, "fail": page == 3}, id=f"page-{page}", batch=batch)
    crawl.add({"page": 9}, id="page-9", delay="1h", batch=batch)
    crawl.work(by_outcome)
    batch.close()
    run_until_idle(store)
    assert got == [], "a job of the batch has not ended (page-9 waits for its time): no then job yet"
    assert crawl.cancel("page-9")
    run_until_idle(store)
    assert got == [(batch.id, {"report": "weekly",
                               "batch": {"id": batch.id, "done": 4, "failed": 1, "cancelled": 1}})]
    run_until_idle(store)
    assert len(got) == 1, "the then job is added once"


def test_BAT_02_closed_after_every_job_ended_the_then_job_is_added_by_the_close(store):
    crawl = store.queue("crawl")
    mailer = store.queue("mailer", dedupe="1h")
    got = then_witness(mailer)
    crawl.work(by_outcome)
    batch = store.batch(then=(mailer, {"n": 1}))
    crawl.add_many([{"page": 1}, {"page": 2}], batch=batch)
    run_until_idle(store)
    assert got == [] and store.batch_state(batch.id).then_id is None, "an open batch adds no then job"
    batch.close()
    state = store.batch_state(batch.id)
    assert state.closed and state.then_id == batch.id, "the close itself adds the then job"
    assert mailer.get(batch.id).state == "waiting"
    run_until_idle(store)
    assert got == [(batch.id, {"n": 1, "batch": {"id": batch.id, "done": 2, "failed": 0, "cancelled": 0}})]
    batch.close()  # closing again changes nothing
    run_until_idle(store)
    assert len(got) == 1


def test_BAT_02_closed_before_its_jobs_end_the_last_end_adds_the_then_job(store):
    crawl = store.queue("crawl")
    mailer = store.queue("mailer")
    got = then_witness(mailer)
    batch = store.batch(then=(mailer, {}))
    crawl.add({"page": 1}, batch=batch)
    batch.close()
    assert store.batch_state(batch.id).then_id is None
    crawl.work(by_outcome)
    run_until_idle(store)
    assert got == [(batch.id, {"batch": {"id": batch.id, "done": 1, "failed": 0, "cancelled": 0}})]


def test_BAT_03_an_empty_batch_closed_adds_its_then_job_at_once(store):
    mailer = store.queue("mailer")
    got = then_witness(mailer)
    batch = store.batch(then=(mailer, {"empty": True}))
    assert store.batch_state(batch.id).total == 0
    batch.close()
    run_until_idle(store)
    assert got == [(batch.id, {"empty": True, "batch": {"id": batch.id, "done": 0, "failed": 0, "cancelled": 0}})]


def test_BAT_04_a_batch_collects_jobs_of_several_queues_added_in_several_calls(store):
    crawl, parse = store.queue("crawl"), store.queue("parse", attempts=1)
    mailer = store.queue("mailer")
    got = then_witness(mailer)
    batch = store.batch(then=(mailer, {}))
    crawl.add({"page": 1}, batch=batch)
    crawl.add_many([{"page": 2}, tinystore.Job({"page": 3}, priority=5)], batch=batch.id)  # by its id too
    parse.add({"fail": True}, batch=batch)
    crawl.work(by_outcome)
    run_until_idle(store)  # crawl's three are done; parse has no handler yet
    assert got == []
    batch.close()
    state = store.batch_state(batch.id)
    assert (state.total, state.done, state.waiting) == (4, 3, 1)
    parse.work(by_outcome)
    run_until_idle(store)
    assert got == [(batch.id, {"batch": {"id": batch.id, "done": 3, "failed": 1, "cancelled": 0}})]


def test_BAT_05_jobs_added_in_a_transaction_join_the_batch_with_its_commit_or_not_at_all(kit, target, store):
    crawl = store.queue("crawl")
    mailer = store.queue("mailer")
    got = then_witness(mailer)
    batch = store.batch(then=(mailer, {}))
    with pytest.raises(RuntimeError):
        with store.transaction() as tx:
            crawl.add({"page": "rolled back"}, id="gone", batch=batch, tx=tx)
            raise RuntimeError("roll back")
    assert crawl.get("gone") is None and store.batch_state(batch.id).total == 0
    with store.transaction() as tx:
        crawl.add({"page": 1}, id="kept", batch=batch, tx=tx)
    conn = kit.app_connection(target)
    try:
        crawl.add({"page": 2}, id="app-rolled-back", batch=batch, conn=conn)
        conn.rollback()
        crawl.add({"page": 3}, id="app", batch=batch, conn=conn)
        conn.commit()
    finally:
        conn.close()
    assert crawl.get("app-rolled-back") is None
    assert store.batch_state(batch.id).total == 2
    batch.close()
    crawl.work(by_outcome)
    run_until_idle(store)
    assert got == [(batch.id, {"batch": {"id": batch.id, "done": 2, "failed": 0, "cancelled": 0}})]


def test_BAT_06_adding_to_a_closed_batch_is_refused_naming_the_batch_and_the_queue_and_writes_nothing(store):
    crawl = store.queue("crawl")
    mailer = store.queue("mailer", dedupe="1h")
    batch = store.batch(then=(mailer, {}))
    crawl.add({"page": 1}, id="in", batch=batch)
    batch.close()
    with pytest.raises(tinystore.InvalidArgument) as refused:
        crawl.add({"page": 2}, id="late", batch=batch)
    assert batch.id in str(refused.value) and "closed" in str(refused.value)
    assert refused.value.queue == "crawl" and refused.value.job_id == "late"
    with pytest.raises(tinystore.InvalidArgument):
        crawl.add_many([{"page": 3}, {"page": 4}], batch=batch)
    with pytest.raises(tinystore.InvalidArgument):
        with store.transaction() as tx:
            crawl.add({"page": 5}, id="late-tx", batch=batch, tx=tx)
    with pytest.raises(tinystore.InvalidArgument) as unknown:
        crawl.add({"page": 6}, id="nowhere", batch="no-such-batch")
    assert "no-such-batch" in str(unknown.value)
    assert [j.id for j in crawl.jobs()] == ["in"], "nothing of the refused adds was written"
    assert store.batch_state(batch.id).total == 1


def test_BAT_07_batch_state_counts_its_jobs_by_state(store, clock):
    crawl = store.queue("crawl", attempts=1, concurrency=1)
    mailer = store.queue("mailer", dedupe="1h")
    batch = store.batch(then=(mailer, {}))
    crawl.add({"fail": True}, batch=batch)
    crawl.add({}, batch=batch)
    crawl.add({}, id="to-cancel", batch=batch)
    crawl.add({}, id="later", delay="1h", batch=batch)
    crawl.add({"hold": True}, id="held", batch=batch)
    seen: list = []

    def handler(payload, run):
        if payload.get("hold"):
            seen.append(store.batch_state(batch.id))
            return None
        return by_outcome(payload, run)

    assert crawl.cancel("to-cancel")
    crawl.work(handler)
    run_until_idle(store)
    state = store.batch_state(batch)
    assert (state.total, state.scheduled, state.waiting, state.running) == (5, 1, 0, 0)
    assert (state.done, state.failed, state.cancelled, state.closed, state.then_id) == (2, 1, 1, False, None)
    assert state.then_queue == "mailer"
    assert seen and seen[0].running == 1, "a job of the batch that runs counts as running"
    clock.advance("1h")
    assert store.batch_state(batch).waiting == 1, "a scheduled job whose time came counts as waiting"
    batch.close()
    run_until_idle(store)
    state = store.batch_state(batch)
    assert (state.done, state.closed, state.then_id) == (3, True, batch.id)
    assert store.batch_state("no-such-batch") is None


def test_BAT_08_a_batch_is_kept_as_long_as_its_then_job_is(store, clock):
    mailer = store.queue("mailer", dedupe="1h")
    mailer.work(lambda payload, run: None)
    kept = store.batch(then=(mailer, {}))
    kept.close()
    run_until_idle(store)
    assert mailer.get(kept.id).state == "done" and store.batch_state(kept.id) is not None
    clock.advance("1h")
    assert mailer.get(kept.id) is None and store.batch_state(kept.id) is None, "past dedupe, with its then job"
    store.maintain()
    assert store.batch_state(kept.id) is None

    brief = store.queue("brief")  # dedupe 0: a done job leaves at once, and its batch with it
    brief.work(lambda payload, run: None)
    gone = store.batch(then=(brief, {}))
    gone.close()
    run_until_idle(store)
    assert store.batch_state(gone.id) is None
    with pytest.raises(tinystore.InvalidArgument):
        gone.close()

    failing = store.queue("failing", attempts=1, keep="1d")
    failing.work(lambda payload, run: run.fail("no"))
    failed = store.batch(then=(failing, {}))
    failed.close()
    run_until_idle(store)
    assert failing.get(failed.id).state == "failed" and store.batch_state(failed.id).then_id == failed.id
    clock.advance("1d")
    assert store.batch_state(failed.id) is None
    store.maintain()
    assert store.batch_state(failed.id) is None

    cancelled = store.batch(then=(store.queue("idle"), {}))
    cancelled.close()
    assert store.queue("idle").cancel(cancelled.id), "a then job is a job: cancelled, its batch goes with it"
    assert store.batch_state(cancelled.id) is None


def test_BAT_09_a_failed_job_retried_before_the_then_job_counts_again_and_after_it_runs_outside(store):
    crawl = store.queue("crawl", attempts=1)
    mailer = store.queue("mailer", dedupe="1h")
    got = then_witness(mailer)
    outcome = {"fail": True}
    crawl.work(lambda payload, run: run.fail("no") if outcome["fail"] else None)
    batch = store.batch(then=(mailer, {}))
    crawl.add({}, id="a", batch=batch)
    crawl.add({}, id="b", delay="1h", batch=batch)  # keeps the batch from ending meanwhile
    run_until_idle(store)
    assert store.batch_state(batch).failed == 1
    assert crawl.retry("a")
    state = store.batch_state(batch)
    assert (state.failed, state.waiting) == (0, 1), "retried before the then job, it counts as not ended"
    outcome["fail"] = False
    run_until_idle(store)
    assert crawl.cancel("b")
    batch.close()
    run_until_idle(store)
    assert got == [(batch.id, {"batch": {"id": batch.id, "done": 1, "failed": 0, "cancelled": 1}})]

    second = store.batch(then=(mailer, {}))
    outcome["fail"] = True
    crawl.add({}, id="c", batch=second)
    second.close()
    run_until_idle(store)
    assert got[-1][1]["batch"]["failed"] == 1
    assert crawl.retry("c")
    outcome["fail"] = False
    run_until_idle(store)
    assert crawl.get("c") is None, "retried after the then job, it runs again on its own"
    state = store.batch_state(second)
    assert (state.done, state.failed, state.waiting) == (0, 1, 0)
    assert len(got) == 2


def test_BAT_10_a_then_job_must_be_a_queue_of_the_store_and_a_json_object_without_a_batch_key(store, open_store):
    mailer = store.queue("mailer")
    for then, why in [((mailer, [1, 2]), "JSON object"), ((mailer, "text"), "JSON object"),
                      ((mailer, {"batch": 1}), '"batch"'), ((mailer, tinystore.Job({}, id="x")), "id="),
                      ((mailer, tinystore.Job({}, delay="1m")), "delay="), ((mailer, {"x": object()}), "not JSON"),
                      (("mailer", {}), "queue of this store"), (mailer, "(queue, payload)"),
                      ((open_store().queue("mailer"), {}), "queue of this store")]:
        with pytest.raises(tinystore.InvalidArgument) as refused:
            store.batch(then=then)
        assert why in str(refused.value)
    with pytest.raises(tinystore.InvalidArgument):
        mailer.add({}, id="r", repeat=tinystore.every("1h"), batch=store.batch(then=(mailer, {})))
    assert mailer.get("r") is None
    batch = store.batch(then=(mailer, tinystore.Job({"x": 1}, priority=7, group="g")))
    batch.close()
    then = mailer.get(batch.id)
    assert (then.priority, then.group, then.payload["x"]) == (7, "g", 1)


def test_BAT_11_a_job_failed_for_good_as_its_lease_ran_out_ends_in_its_batch(kit, store, clock):
    crawl = store.queue("crawl", attempts=1, lease="10s")
    mailer = store.queue("mailer", dedupe="1h")
    batch = store.batch(then=(mailer, {}))
    crawl.add({}, id="lost", batch=batch)
    batch.close()
    assert [c.id for c in kit.claim_cycle(store, crawl, 1, clock.now()).claimed] == ["lost"]
    assert store.batch_state(batch).running == 1
    clock.advance(11)
    kit.claim_cycle(store, crawl, 0, clock.now())  # ends the lease that ran out: its only attempt
    assert crawl.get("lost").state == "failed"
    state = store.batch_state(batch)
    assert (state.failed, state.then_id) == (1, batch.id)
    assert mailer.get(batch.id).payload["batch"]["failed"] == 1


def test_BAT_12_a_running_job_cancelled_ends_in_its_batch_as_cancelled(store):
    crawl = store.queue("crawl")
    mailer = store.queue("mailer", dedupe="1h")
    batch = store.batch(then=(mailer, {}))
    crawl.add({}, id="run", batch=batch)
    batch.close()

    def handler(payload, run):
        assert crawl.cancel("run")

    crawl.work(handler)
    run_until_idle(store)
    assert mailer.get(batch.id).payload["batch"] == {"id": batch.id, "done": 0, "failed": 0, "cancelled": 1}


def test_BAT_13_a_job_whose_id_is_kept_adds_nothing_and_does_not_join_the_batch(store):
    crawl = store.queue("crawl")
    crawl.add({}, id="there")
    batch = store.batch(then=(store.queue("mailer"), {}))
    again = crawl.add({}, id="there", batch=batch)
    assert not again.added and store.batch_state(batch).total == 0
    batch.close()
    assert store.batch_state(batch).then_id == batch.id, "the batch has no job: closed, it ended"


def test_BAT_14_a_serving_worker_runs_the_then_job_its_own_settlement_added_without_waiting(open_store):
    """The then job is added by the settlement of the batch's last job: its commit wakes the runners of
    the then queue in every process, the settling worker's own included (it did not ask for that work)."""
    store = open_store()  # the real clock: a worker left asleep would not be woken by time
    crawl, mailer = store.queue("crawl"), store.queue("mailer")
    ran = threading.Event()
    crawl.work(lambda payload, run: None)
    mailer.work(lambda payload, run: ran.set())
    batch = store.batch(then=(mailer, {}))
    crawl.add({}, batch=batch)
    batch.close()
    store.start()
    try:
        assert ran.wait(WAIT), "the then job waited for a worker that was never woken"
    finally:
        store.stop()


ADD_IN_CHILD = """
import sys
import tinystore
store = tinystore.open(sys.argv[1])
store.queue("parse").add({"from": "child"}, id="child", batch=sys.argv[2])
store.close()
"""


def test_BAT_04_another_process_adds_jobs_to_the_batch_by_its_id(target, store):
    crawl, mailer = store.queue("crawl"), store.queue("mailer", dedupe="1h")
    store.queue("parse")
    batch = store.batch(then=(mailer, {}))
    crawl.add({}, batch=batch)
    done = run_child(ADD_IN_CHILD, target, batch.id)
    assert done.returncode == 0, done.stderr
    assert store.batch_state(batch).total == 2
    batch.close()
    crawl.work(lambda payload, run: None)
    run_until_idle(store)
    assert store.batch_state(batch).then_id is None, "the child's job has not run"
    store.queue("parse").work(lambda payload, run: None)
    run_until_idle(store)
    assert mailer.get(batch.id).payload["batch"]["done"] == 2


def test_BAT_15_cancel_many_and_retry_many_count_in_the_batches_of_the_jobs_they_act_on(store):
    crawl = store.queue("crawl", attempts=1)
    mailer = store.queue("mailer")
    got = then_witness(mailer)
    crawl.work(by_outcome)
    batch = store.batch(then=(mailer, {"n": 1}))
    crawl.add({"page": 1, "fail": True}, id="failing", batch=batch)
    crawl.add({"page": 2}, id="done", batch=batch)
    for n in range(300):  # more than one chunk of cancel_many
        crawl.add({"page": 10 + n}, id=f"later-{n:03}", delay="1h", batch=batch)
    crawl.add({"page": 0}, id="outside", delay="1h")
    batch.close()
    run_until_idle(store)
    assert crawl.retry_many(state="failed") == 1  # its failure no longer counts: the batch waits for it again
    state = store.batch_state(batch.id)
    assert (state.waiting, state.failed, state.then_id) == (1, 0, None)
    crawl.cancel_many(ids=["failing"])
    assert crawl.cancel_many(state="scheduled") == 301  # the batch's 300 and one job outside it
    run_until_idle(store)
    assert got == [(batch.id, {"n": 1, "batch": {"id": batch.id, "done": 1, "failed": 0, "cancelled": 301}})]
    run_until_idle(store)
    assert len(got) == 1, "the then job is added once"
