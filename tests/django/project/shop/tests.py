"""The shop's own tests of its tasks, as a Django project writes them, run by ``manage.py test`` on the
database SHOP_DATABASE names (a SQLite file or PostgreSQL); ``NaiveTimes`` runs with SHOP_USE_TZ=0.

A ``TestCase`` runs each test in a transaction that never commits: its tasks
run with ``run_until_idle()`` in that transaction. A ``TransactionTestCase``
commits: its tasks run in the store's workers, in this process or in
``manage.py tinystore_worker``.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.db.transaction import TransactionManagementError
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import TaskResultDoesNotExist
from django.test import TestCase, TransactionTestCase, override_settings
from unittest import skipIf
from django.utils import timezone

from .models import Order
from .tasks import charge, exits, interrupts, report, send_receipt

HERE = f"{socket.gethostname()}:{os.getpid()}"
PROJECT = Path(__file__).resolve().parent.parent


class Rollback(Exception):
    pass


def every_queue() -> dict:
    """TASKS as the settings have them, with QUEUES = [] for the default backend."""
    return {**settings.TASKS, "default": {**settings.TASKS["default"], "QUEUES": []}}


def assert_failed_with_times(test, result, exception_class_path: str, worker: str = HERE) -> None:
    test.assertEqual(result.status, TaskResultStatus.FAILED)
    test.assertEqual([e.exception_class_path for e in result.errors], [exception_class_path])
    test.assertIsNotNone(result.started_at)
    test.assertEqual(result.last_attempted_at, result.started_at)
    test.assertLessEqual(result.enqueued_at, result.started_at)
    test.assertLessEqual(result.started_at, result.finished_at)
    test.assertEqual(result.worker_ids, [worker])


class TasksInATestCase(TestCase):
    def test_a_task_enqueued_in_the_tests_transaction_runs_there_and_sees_the_tests_rows(self):
        order = Order.objects.create(total=120)
        result = send_receipt.enqueue(order.id)
        self.assertEqual(result.status, TaskResultStatus.READY)

        default_task_backend.run_until_idle()

        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertEqual(result.return_value, {"order": order.id, "receipt": "receipt for 120"})
        self.assertEqual(result.worker_ids, [HERE])
        order.refresh_from_db()
        self.assertEqual(order.receipt, "receipt for 120")

    def test_a_failed_task_has_its_times_and_its_worker(self):
        result = charge.enqueue(1)
        default_task_backend.run_until_idle()
        result.refresh()
        assert_failed_with_times(self, result, "shop.tasks.PaymentDeclined")

    def test_a_task_that_exits_fails_and_the_tasks_after_it_run(self):
        exited = exits.enqueue(3)
        receipt = send_receipt.enqueue(Order.objects.create(total=5).id)
        default_task_backend.run_until_idle()
        exited.refresh()
        receipt.refresh()
        assert_failed_with_times(self, exited, "builtins.SystemExit")
        self.assertEqual(receipt.status, TaskResultStatus.SUCCESSFUL)

    def test_a_keyboard_interrupt_in_a_task_stops_run_until_idle_as_djangos_immediate_backend_lets_it(self):
        interrupts.enqueue()
        with self.assertRaises(KeyboardInterrupt):
            default_task_backend.run_until_idle()

    def test_a_task_rolled_back_with_its_savepoint_neither_runs_nor_reads_back(self):
        try:
            with transaction.atomic():
                rolled_back = send_receipt.enqueue(Order.objects.create(total=7).id)
                raise Rollback()
        except Rollback:
            pass
        kept = charge.enqueue(1)
        default_task_backend.run_until_idle()
        self.assertEqual(rolled_back.status, TaskResultStatus.READY)  # it never ran
        with self.assertRaises(TaskResultDoesNotExist):
            default_task_backend.get_result(rolled_back.id)
        self.assertEqual(default_task_backend.get_result(kept.id).status, TaskResultStatus.FAILED)

    def test_a_task_due_later_waits_and_reads_back_as_enqueued_in_its_block(self):
        later = timezone.now() + timedelta(hours=1)
        result = send_receipt.using(run_after=later).enqueue(1)
        default_task_backend.run_until_idle()
        found = default_task_backend.get_result(result.id)
        self.assertEqual(found.status, TaskResultStatus.READY)
        self.assertEqual(found.task.run_after, later)

    def test_arguments_that_are_not_json_are_a_type_error_naming_the_task_and_its_queue(self):
        with self.assertRaisesMessage(TypeError, "task shop.tasks.send_receipt: its arguments must be JSON "
                                                 "(Unsupported type: <class 'datetime.datetime'>) (queue 'default')"):
            send_receipt.enqueue(timezone.now())

    def test_queues_left_empty_allow_every_queue_and_pass_the_checks(self):
        with override_settings(TASKS=every_queue()):
            self.assertEqual(default_task_backend.check(), [])
            receipt = send_receipt.enqueue(Order.objects.create(total=4).id)
            declined = charge.enqueue(4)
            default_task_backend.run_until_idle()
            self.assertEqual(default_task_backend.get_result(receipt.id).status, TaskResultStatus.SUCCESSFUL)
            self.assertEqual(default_task_backend.get_result(declined.id).status, TaskResultStatus.FAILED)


class TasksCommitted(TransactionTestCase):
    def test_run_until_idle_inside_transaction_atomic_is_refused_saying_why_instead_of_waiting(self):
        with transaction.atomic():
            order = Order.objects.create(total=120)
            result = send_receipt.enqueue(order.id)
            with self.assertRaisesMessage(TransactionManagementError, "run_until_idle() inside "
                                                                      "transaction.atomic cannot run"):
                default_task_backend.run_until_idle()
            # what this thread enqueued reads back before the commit
            self.assertEqual(default_task_backend.get_result(result.id).status, TaskResultStatus.READY)
        default_task_backend.run_until_idle()  # committed: the store's workers run it, in this process
        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        order.refresh_from_db()
        self.assertEqual(order.receipt, "receipt for 120")

    def test_a_failed_task_has_its_times_and_its_worker(self):
        result = charge.enqueue(1)
        default_task_backend.run_until_idle()
        found = default_task_backend.get_result(result.id)
        assert_failed_with_times(self, found, "shop.tasks.PaymentDeclined")
        self.assertTrue(found.errors[0].traceback.rstrip().endswith("PaymentDeclined: card declined for order 1"))

    def test_a_task_that_exits_fails_and_the_tasks_after_it_run(self):
        exited = exits.enqueue(3)
        receipt = send_receipt.enqueue(Order.objects.create(total=5).id)
        default_task_backend.run_until_idle()
        assert_failed_with_times(self, default_task_backend.get_result(exited.id), "builtins.SystemExit")
        self.assertEqual(default_task_backend.get_result(receipt.id).status, TaskResultStatus.SUCCESSFUL)

    def test_a_task_enqueued_inside_atomic_after_override_settings_of_tasks_commits_with_the_block(self):
        with override_settings(TASKS={**settings.TASKS}):
            with transaction.atomic():
                result = send_receipt.enqueue(Order.objects.create(total=9).id)
            default_task_backend.run_until_idle()
            result.refresh()
            self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

    def test_a_result_keeps_its_tasks_run_after_and_backend_and_refreshes_through_that_backend(self):
        later = timezone.now() + timedelta(hours=1)
        waiting = send_receipt.using(run_after=later).enqueue(1)
        found = default_task_backend.get_result(waiting.id)
        self.assertEqual((found.task.backend, found.task.queue_name), ("default", "default"))
        self.assertLess(abs(found.task.run_after - later), timedelta(milliseconds=1))

        archive = task_backends["archive"]
        weekly = report.using(backend="archive").enqueue(48)
        found = archive.get_result(weekly.id)
        self.assertEqual((found.task.backend, found.task.queue_name), ("archive", "reports"))
        archive.run_until_idle()
        found.refresh()
        self.assertEqual(found.status, TaskResultStatus.SUCCESSFUL)
        self.assertEqual(found.return_value, "report of week 48")


class Worker(TransactionTestCase):
    """``manage.py tinystore_worker`` on this test database, in a process of its own."""

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        database = connection.settings_dict["NAME"]
        target = os.environ["SHOP_DATABASE"]
        if connection.vendor == "postgresql":
            database = target.rsplit("/", 1)[0] + "/" + database
        worker = subprocess.Popen([sys.executable, "manage.py", "tinystore_worker", *args], cwd=PROJECT,
                                  env={**os.environ, "SHOP_DATABASE": database, **env}, stderr=subprocess.PIPE,
                                  text=True)
        self.addCleanup(lambda: worker.poll() is None and worker.kill())
        return worker

    def test_a_task_that_exits_or_interrupts_fails_the_worker_goes_on_and_a_sigterm_exits_it_0(self):
        exited, interrupted = exits.enqueue(3), interrupts.enqueue()
        receipt = send_receipt.enqueue(Order.objects.create(total=5).id)
        worker = self.start("--grace", "5s")
        deadline = time.monotonic() + 60
        while not default_task_backend.get_result(receipt.id).is_finished:
            self.assertIsNone(worker.poll(), "the worker exited")
            self.assertLess(time.monotonic(), deadline, "the worker did not run the tasks within 60s")
            time.sleep(0.05)
        worker.send_signal(signal.SIGTERM)
        self.assertEqual(worker.wait(30), 0, worker.stderr.read())
        worker_id = f"{socket.gethostname()}:{worker.pid}"
        assert_failed_with_times(self, default_task_backend.get_result(exited.id), "builtins.SystemExit", worker_id)
        assert_failed_with_times(self, default_task_backend.get_result(interrupted.id), "builtins.KeyboardInterrupt",
                                 worker_id)
        self.assertEqual(default_task_backend.get_result(receipt.id).status, TaskResultStatus.SUCCESSFUL)

    def test_a_sigterm_while_the_worker_starts_exits_it_0_having_claimed_nothing(self):
        receipt = send_receipt.enqueue(Order.objects.create(total=5).id)
        worker = self.start(SHOP_SLOW_CHECKS="1")
        self.assertEqual(worker.stderr.readline(), "checking\n")  # Django runs the system checks
        worker.send_signal(signal.SIGTERM)
        self.assertEqual(worker.wait(30), 0, worker.stderr.read())
        self.assertEqual(default_task_backend.get_result(receipt.id).status, TaskResultStatus.READY)

    def test_with_queues_left_empty_the_worker_serves_every_queue_the_store_holds(self):
        with override_settings(TASKS=every_queue()):
            weekly = report.using(queue_name="weekly").enqueue(48)  # a queue no setting names
            receipt = send_receipt.enqueue(Order.objects.create(total=6).id)
            worker = self.start("--skip-checks", SHOP_EVERY_QUEUE="1")
            deadline = time.monotonic() + 60
            while not all(default_task_backend.get_result(r.id).is_finished for r in (weekly, receipt)):
                self.assertIsNone(worker.poll(), "the worker exited")
                self.assertLess(time.monotonic(), deadline, "the worker did not run the tasks within 60s")
                time.sleep(0.05)
            worker.send_signal(signal.SIGTERM)
            self.assertEqual(worker.wait(30), 0, worker.stderr.read())
            self.assertEqual(default_task_backend.get_result(weekly.id).return_value, "report of week 48")
            self.assertEqual(default_task_backend.get_result(receipt.id).status, TaskResultStatus.SUCCESSFUL)


class AsyncView(TransactionTestCase):
    """An async view enqueues with ``aenqueue`` and reads back with ``aget_result``, awaiting the store."""

    async def test_an_async_view_enqueues_a_task_that_a_worker_runs(self):
        order = await Order.objects.acreate(total=30)
        response = await self.async_client.get(f"/orders/{order.id}/receipt")
        self.assertEqual(response.status_code, 200)
        enqueued = response.json()
        self.assertEqual(enqueued["status"], TaskResultStatus.READY)
        await sync_to_async(default_task_backend.run_until_idle)()
        result = await default_task_backend.aget_result(enqueued["id"])
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        self.assertEqual(result.return_value, {"order": order.id, "receipt": "receipt for 30"})


@skipIf(settings.USE_TZ, "run with SHOP_USE_TZ=0")
class NaiveTimes(TransactionTestCase):
    """USE_TZ = False: Django's datetimes are naive, in TIME_ZONE, and so are its connection's."""

    def test_a_task_enqueued_inside_atomic_commits_with_the_block_and_its_times_are_naive(self):
        later = timezone.now() + timedelta(hours=1)
        with transaction.atomic():
            order = Order.objects.create(total=11)
            waiting = send_receipt.using(run_after=later).enqueue(order.id)
            result = send_receipt.enqueue(order.id)
        default_task_backend.run_until_idle()
        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        for moment in (result.enqueued_at, result.started_at, result.finished_at):
            self.assertIsNone(moment.tzinfo)
        self.assertLessEqual(result.enqueued_at, result.started_at)
        found = default_task_backend.get_result(waiting.id)
        self.assertEqual(found.status, TaskResultStatus.READY)
        self.assertLess(abs(found.task.run_after - later), timedelta(milliseconds=1))
