"""The shop's tasks: a receipt that writes its order's row, a payment that fails, an async one that
takes its context, tasks that exit or interrupt, a report for the second backend, and one that writes a
row as it runs, in a queue that runs one task at a time."""

import sys

from django.tasks import task

from .models import Order


class PaymentDeclined(Exception):
    pass


@task
def send_receipt(order_id: int) -> dict:
    order = Order.objects.get(id=order_id)
    order.receipt = f"receipt for {order.total}"
    order.save()
    return {"order": order_id, "receipt": order.receipt}


@task(queue_name="payments")
def charge(order_id: int) -> None:
    raise PaymentDeclined(f"card declined for order {order_id}")


@task(takes_context=True)
async def which_attempt(context) -> int:
    return context.attempt


@task(queue_name="payments")
def exits(code: int) -> None:
    sys.exit(code)


@task(queue_name="payments")
def interrupts() -> None:
    raise KeyboardInterrupt()


@task(queue_name="reports")
def report(week: int) -> str:
    return f"report of week {week}"


@task(queue_name="ranked")
def note(label: str) -> None:
    Order.objects.create(total=0, receipt=label)  # ids in the order the tasks ran
