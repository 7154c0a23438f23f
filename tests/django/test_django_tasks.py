"""Django's tasks through tinystore, in a real project run by manage.py, on SQLite and on PostgreSQL.

``manage.py shop enqueue`` (``project/shop/management/commands/shop.py``)
enqueues inside ``transaction.atomic`` with an order's row, in a block that
rolls back, outside any transaction, later, and with options tinystore
refuses; ``manage.py tinystore_worker`` runs the tasks; ``manage.py shop
results`` reads them back through Django's ``TaskResult``.
"""

from __future__ import annotations

import os
import signal
from datetime import datetime
from pathlib import Path

import pytest

import kits
import tinystore
from djangotools import Shop, wait_until
from helpers import django_python, stderr_of, wait_child


def test_a_task_commits_with_the_rows_of_its_atomic_block_and_a_rolled_back_one_leaves_neither(shop: Shop) -> None:
    enqueued = shop.manage("shop", "enqueue")

    assert enqueued["status"] == "READY"
    assert shop.manage("shop", "orders") == [[1, 120, ""]]  # order 2 was rolled back with its task
    results = shop.manage("shop", "results", enqueued["committed"], enqueued["rolled_back"], enqueued["later"])
    assert results[enqueued["rolled_back"]] is None
    assert results[enqueued["committed"]]["status"] == "READY"
    assert results[enqueued["committed"]]["args"] == [1]
    assert results[enqueued["later"]]["status"] == "READY"
    store = tinystore.open(shop.target)
    try:
        assert store.queue("default").get(enqueued["rolled_back"]) is None
        assert store.queue("default").get(enqueued["committed"]).state == "waiting"
        later = store.queue("default").get(enqueued["later"])
        assert later.state == "scheduled" and (later.at - datetime.now(later.at.tzinfo)).days == 0  # run_after: a day
    finally:
        store.close()


def test_options_tinystore_cannot_take_and_a_worker_of_unknown_queues_are_refused_saying_why(shop: Shop) -> None:
    refused = shop.manage("shop", "enqueue")["refused"]

    assert refused["priority"].startswith("InvalidTask: priority must be a whole number between -100 and 100")
    assert refused["queue"] == "InvalidTask: Queue 'elsewhere' is not valid for backend."
    assert refused["arguments"].startswith("TypeError: task shop.tasks.send_receipt: its arguments must be JSON")
    assert "queue 'default'" in refused["arguments"]
    assert shop.refused("tinystore_worker", "--queues", "default,elsewhere") == \
        "CommandError: --queues elsewhere: not in the QUEUES of task backend 'default'"
    assert shop.refused("tinystore_worker", "--backend", "other").startswith("CommandError: --backend other: ")


def test_the_worker_runs_the_tasks_and_their_results_errors_and_times_read_back(shop: Shop) -> None:
    enqueued = shop.manage("shop", "enqueue")
    store = tinystore.open(shop.target)
    worker = shop.start("tinystore_worker", "--grace", "5s")
    try:
        wait_until(lambda: all(store.queue(queue).get(enqueued[task]).state in ("done", "failed")
                               for queue, task in (("default", "committed"), ("payments", "declined"),
                                                   ("default", "attempt"))), "the worker ran the three tasks")
    finally:
        worker.send_signal(signal.SIGTERM)
        assert wait_child(worker) == 0, stderr_of(worker)
        store.close()
    log = stderr_of(worker)
    assert "stopped" in log.splitlines()[-1]
    # Django's task signals were sent, and its django.tasks logger told them
    assert f"Task id={enqueued['committed']} path=shop.tasks.send_receipt state=RUNNING" in log
    assert f"Task id={enqueued['committed']} path=shop.tasks.send_receipt state=SUCCESSFUL" in log
    assert f"Task id={enqueued['declined']} path=shop.tasks.charge state=FAILED" in log

    results = shop.manage("shop", "results", enqueued["committed"], enqueued["declined"], enqueued["attempt"],
                          enqueued["later"])
    receipt = results[enqueued["committed"]]
    assert receipt["status"] == "SUCCESSFUL"
    assert receipt["return_value"] == {"order": 1, "receipt": "receipt for 120"}
    assert receipt["attempts"] == 1
    enqueued_at, started_at, finished_at = map(datetime.fromisoformat, receipt["times"])
    assert enqueued_at <= started_at <= finished_at
    assert shop.manage("shop", "orders") == [[1, 120, "receipt for 120"]]  # the task wrote its row

    declined = results[enqueued["declined"]]
    assert declined["status"] == "FAILED" and declined["queue"] == "payments"
    [[path, traceback]] = declined["errors"]
    assert path == "shop.tasks.PaymentDeclined" and declined["exception_class"] == "PaymentDeclined"
    assert traceback.startswith("Traceback (most recent call last):")
    assert 'raise PaymentDeclined(f"card declined for order {order_id}")' in traceback
    assert traceback.rstrip().endswith("shop.tasks.PaymentDeclined: card declined for order 1")

    assert results[enqueued["attempt"]]["return_value"] == 1  # TaskContext.attempt: the first attempt
    assert results[enqueued["later"]]["status"] == "READY"  # due tomorrow


def test_tasks_enqueued_with_priorities_run_highest_priority_first_and_keep_their_priority(shop: Shop) -> None:
    ids = shop.manage("shop", "ranked")
    store = tinystore.open(shop.target)
    try:
        assert [store.queue("ranked").get(id).priority for id in ids] == [-10, 0, 100, 0, 10, -100]
        worker = shop.start("tinystore_worker", "--grace", "5s")
        try:
            wait_until(lambda: all(store.queue("ranked").get(id).state == "done" for id in ids),
                       "the worker ran the ranked tasks")
        finally:
            worker.send_signal(signal.SIGTERM)
            assert wait_child(worker) == 0, stderr_of(worker)
    finally:
        store.close()
    ran = [receipt for _, _, receipt in shop.manage("shop", "orders")]
    assert ran == ["urgent", "high", "plain-1", "plain-2", "low", "lowest"]


def test_tasks_enqueued_through_a_pooler_are_run_by_a_worker_given_direct_and_refused_without(tmp_path: Path) -> None:
    from pgbouncer import BINARY, PgBouncer  # tests/pgbouncer.py: PgBouncer in transaction pooling mode

    if not os.path.exists(BINARY):
        pytest.skip(f"no pgbouncer at {BINARY} (set PGBOUNCER)")
    python = django_python()
    kit = kits.KITS["postgres"](tmp_path)
    try:
        direct = kit.new_target("django")
        pooler = PgBouncer(direct)
        try:
            shop = Shop(python, pooler.url)  # Django's connection, and the tasks enqueued, go through the pooler
            shop.manage("migrate", "--verbosity", "0")
            enqueued = shop.manage("shop", "enqueue")
            refused = shop.refused("tinystore_worker", "--grace", "5s")
            assert f"the store's URL reaches 127.0.0.1:{pooler.port}, database {pooler.dbname!r}, through a " \
                   f"connection pooler" in refused, refused

            shop.env["SHOP_DIRECT"] = direct  # OPTIONS["direct"]
            worker = shop.start("tinystore_worker", "--grace", "5s")
            try:
                wait_until(lambda: shop.manage("shop", "orders") == [[1, 120, "receipt for 120"]],
                           "the worker ran the committed task, whose row it wrote through the pooler")
            finally:
                worker.send_signal(signal.SIGTERM)
                assert wait_child(worker) == 0, stderr_of(worker)
            results = shop.manage("shop", "results", enqueued["committed"])
            assert results[enqueued["committed"]]["status"] == "SUCCESSFUL"
        finally:
            pooler.close()
    finally:
        kit.cleanup()
