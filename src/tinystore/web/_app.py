"""The ASGI app: the page, its JSON reads, its event stream and its actions, on Starlette.

``/metrics`` is the store's Prometheus text (``tinystore.metrics``): its
waiting and running jobs per queue, read from the store, beside this
process's own counters.

Every URL the page uses is relative to where the app is mounted (the page's
``<base href>`` is the ASGI ``root_path``). Reads are GETs; actions are POSTs
of JSON that carry the token in the ``X-Tinystore-Token`` header, which a
page of another site cannot set without the app's consent (it gives none),
so no cookie and no CSRF token are needed. Without the right token an action
is refused (403) before anything is read.
"""

from __future__ import annotations

import hmac
import html
import json
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._errors import Closed, Error, InvalidArgument, Unavailable
from .._package import read
from .._store import Store
from ..metrics import CONTENT_TYPE, prometheus_text
from . import _views
from ._feed import Feed

STATIC = Path(__file__).parent / "static"
HEADER = "x-tinystore-token"
PING = 15.0  # a comment on a quiet stream, so that a browser that left is noticed
SECURITY = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def build(store: Store, token: str) -> Starlette:
    feed = Feed(store)
    page = read(__package__, "static/index.html")

    async def index(request: Request) -> Response:
        base = html.escape(request.scope.get("root_path", "").rstrip("/") + "/", quote=True)
        return HTMLResponse(page.replace("{{base}}", base), headers=SECURITY)

    async def overview(request: Request) -> Response:
        return await _answer(lambda: _views.overview(store))

    async def queues(request: Request) -> Response:
        return await _answer(lambda: {"queues": store.queues()})

    async def jobs(request: Request) -> Response:
        return await _answer(lambda: _views.jobs_page(store, request.query_params))

    async def job(request: Request) -> Response:
        q = request.query_params
        return await _answer(lambda: _views.job_page(store, q.get("queue"), q.get("id")))

    async def metrics(request: Request) -> Response:
        text = await run_in_threadpool(prometheus_text, store)
        return Response(text, headers={**SECURITY, "Content-Type": CONTENT_TYPE})

    async def events(request: Request) -> Response:
        try:
            views = await run_in_threadpool(_stream_views, store, dict(request.query_params))
        except (Error, _views.NotFound) as exc:
            return _error(exc)
        subscriber = feed.subscribe(views)

        async def stream() -> AsyncIterator[str]:
            try:
                while not subscriber.ended:
                    items = await subscriber.next(PING)
                    if items is None:
                        yield ": ping\n\n"
                    for event, data in items or ():
                        yield f"event: {event}\ndata: {data}\n\n"
            finally:
                feed.unsubscribe(subscriber)
        headers = {**SECURITY, "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    def action(act: Callable[[Store, dict[str, Any]], dict[str, Any]]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            given = request.headers.get(HEADER, "")
            if not hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8")):
                return JSONResponse({"error": "this action needs the dashboard's token (header X-Tinystore-Token)"},
                                    403, headers=SECURITY)
            try:
                body = json.loads(await request.body() or b"null")
            except ValueError:
                return _error(InvalidArgument("the request's body must be JSON"))
            if not isinstance(body, dict):
                return _error(InvalidArgument("the request's body must be a JSON object"))
            return await _answer(lambda: act(store, body))
        return endpoint

    routes = [
        Route("/", index),
        Route("/api/overview", overview),
        Route("/api/queues", queues),
        Route("/api/jobs", jobs),
        Route("/api/job", job),
        Route("/api/events", events),
        Route("/metrics", metrics),
        Route("/api/retry", action(_retry), methods=["POST"]),
        Route("/api/cancel", action(_cancel), methods=["POST"]),
        Route("/api/retry-failed", action(_retry_failed), methods=["POST"]),
        Route("/api/pause", action(_pause), methods=["POST"]),
        Route("/api/resume", action(_resume), methods=["POST"]),
        Route("/api/cancel-many", action(_cancel_many), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    return Starlette(routes=routes)


def _stream_views(store: Store, query: dict[str, str]) -> dict[str, tuple[Any, Callable[[], Any]]]:
    """What a stream tells: the queues' counts always, and the view the page shows, checked first."""
    views: dict[str, tuple[Any, Callable[[], Any]]] = {"overview": ("overview", lambda: _views.overview(store))}
    shown = query.pop("view", "queues")
    if shown == "jobs":
        _views.jobs_page(store, query)  # refuse a bad filter now, not in every read
        views["view"] = (("jobs", tuple(sorted(query.items()))), lambda: _views.jobs_page(store, query))
    elif shown == "job":
        queue, id = query.get("queue"), query.get("id")
        _views.known_queue(store, queue)
        if id is None:
            raise InvalidArgument("name a job: id=ID")
        views["view"] = (("job", queue, id), lambda: _views.job_page(store, queue, id))
    elif shown != "queues":
        raise InvalidArgument(f"view={shown!r} must be queues, jobs or job")
    return views


async def _answer(read: Callable[[], Any]) -> Response:
    try:
        return JSONResponse(await run_in_threadpool(read), headers=SECURITY)
    except (Error, _views.NotFound) as exc:
        return _error(exc)


def _error(exc: Exception) -> Response:
    if isinstance(exc, InvalidArgument):
        status = 400
    elif isinstance(exc, _views.NotFound):
        status = 404
    elif isinstance(exc, (Unavailable, Closed)):
        status = 503
    else:
        status = 500
    return JSONResponse({"error": str(exc)}, status, headers=SECURITY)


# The actions: each says what it did.

def _named(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{key} must be a non-empty string, not {value!r}")
    return value


def _retry(store: Store, body: dict[str, Any]) -> dict[str, Any]:
    queue = _views.known_queue(store, _named(body, "queue"))
    id = _named(body, "id")
    if queue.retry(id):
        return {"done": True, "message": f"job {id} of {queue.name} waits to run again, its attempts from zero"}
    return {"done": False, "message": f"no failed job {id} in {queue.name}: nothing was changed"}


def _cancel(store: Store, body: dict[str, Any]) -> dict[str, Any]:
    queue = _views.known_queue(store, _named(body, "queue"))
    id = _named(body, "id")
    if queue.cancel(id):
        return {"done": True, "message": f"job {id} of {queue.name} was cancelled"}
    return {"done": False, "message": f"no scheduled, waiting or running job {id} in {queue.name}: nothing was changed"}


def _retry_failed(store: Store, body: dict[str, Any]) -> dict[str, Any]:
    """Every failed job of a queue (of one group, where ``group`` names one) runs again (retry_many)."""
    queue = _views.known_queue(store, _named(body, "queue"))
    retried = queue.retry_many(group=_optional(body, "group"))
    return {"done": retried > 0, "message": f"{retried} failed job{'' if retried == 1 else 's'} of "
                                            f"{queue.name} wait{'s' if retried == 1 else ''} to run again"}


def _pause(store: Store, body: dict[str, Any]) -> dict[str, Any]:
    """No process starts the queue's jobs from now on; its running ones go on and settle."""
    queue = _views.known_queue(store, _named(body, "queue"))
    if not queue.pause():
        return {"done": False, "message": f"{queue.name} was paused already: nothing was changed"}
    return {"done": True, "message": f"{queue.name} is paused: no worker starts its jobs until it is resumed"}


def _resume(store: Store, body: dict[str, Any]) -> dict[str, Any]:
    queue = _views.known_queue(store, _named(body, "queue"))
    if not queue.resume():
        return {"done": False, "message": f"{queue.name} was not paused: nothing was changed"}
    return {"done": True, "message": f"{queue.name} is resumed: its due jobs start again"}


def _cancel_many(store: Store, body: dict[str, Any]) -> dict[str, Any]:
    """The scheduled, waiting and running jobs a page of jobs lists with its filters (``state``, ``group``)
    are taken away (cancel_many)."""
    queue = _views.known_queue(store, _named(body, "queue"))
    cancelled = queue.cancel_many(state=_optional(body, "state"), group=_optional(body, "group"))
    return {"done": cancelled > 0,
            "message": f"{cancelled} job{'' if cancelled == 1 else 's'} of {queue.name} cancelled"}


def _optional(body: dict[str, Any], key: str) -> Any:
    """A filter of the body, None where it is absent or empty (as the page's filters send "any")."""
    value = body.get(key)
    return None if value in (None, "") else value
