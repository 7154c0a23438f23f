"""The shop's one view: an async view that enqueues a receipt with ``aenqueue`` and reads it back with
``aget_result``, as an async Django application would."""

from django.http import JsonResponse
from django.tasks import default_task_backend

from .tasks import send_receipt


async def receipt(request, order_id: int) -> JsonResponse:
    result = await send_receipt.aenqueue(order_id)
    found = await default_task_backend.aget_result(result.id)
    return JsonResponse({"id": result.id, "status": found.status})
