"""``manage.py shop enqueue | ranked | results ID... | orders``: what the tests do with the shop, printed as JSON."""

import json
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.db import transaction
from django.tasks import default_task_backend
from django.tasks.exceptions import TaskResultDoesNotExist
from django.utils import timezone

from shop.models import Order
from shop.tasks import charge, note, send_receipt, which_attempt


class RolledBack(Exception):
    pass


class Command(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("action", choices=["enqueue", "ranked", "results", "orders"])
        parser.add_argument("ids", nargs="*")

    def handle(self, action, ids, **options):
        self.stdout.write(json.dumps(getattr(self, action)(ids)))

    def enqueue(self, ids):
        with transaction.atomic():
            order = Order.objects.create(id=1, total=120)
            committed = send_receipt.enqueue(order.id)
        try:
            with transaction.atomic():
                Order.objects.create(id=2, total=80)
                rolled_back = send_receipt.enqueue(2)
                raise RolledBack()
        except RolledBack:
            pass
        declined = charge.enqueue(1)  # outside a transaction: it commits by itself
        attempt = which_attempt.enqueue()
        later = send_receipt.using(run_after=timezone.now() + timedelta(days=1)).enqueue(1)
        refused = {}
        for name, make in {"priority": lambda: send_receipt.using(priority=101),
                           "queue": lambda: send_receipt.using(queue_name="elsewhere"),
                           "arguments": lambda: send_receipt.enqueue(object())}.items():
            try:
                make()
            except Exception as exc:
                refused[name] = f"{type(exc).__name__}: {exc}"
        return {"committed": committed.id, "status": committed.status, "rolled_back": rolled_back.id,
                "declined": declined.id, "attempt": attempt.id, "later": later.id, "refused": refused}

    def ranked(self, ids):
        """Tasks of several priorities, enqueued before any worker runs: "ranked" runs one at a time."""
        labels = [("low", -10), ("plain-1", 0), ("urgent", 100), ("plain-2", 0), ("high", 10), ("lowest", -100)]
        return [note.using(priority=priority).enqueue(label).id for label, priority in labels]

    def results(self, ids):
        return {id: self.result(id) for id in ids}

    def result(self, id):
        try:
            result = default_task_backend.get_result(id)
        except TaskResultDoesNotExist:
            return None
        return {"task": result.task.module_path, "queue": result.task.queue_name, "status": result.status,
                "return_value": result.return_value if result.status == "SUCCESSFUL" else None,
                "errors": [[e.exception_class_path, e.traceback] for e in result.errors],
                "exception_class": result.errors[0].exception_class.__name__ if result.errors else None,
                "attempts": result.attempts, "args": result.args,
                "times": [t and t.isoformat() for t in (result.enqueued_at, result.started_at, result.finished_at)]}

    def orders(self, ids):
        return [[o.id, o.total, o.receipt] for o in Order.objects.order_by("id")]
