"""FastAPI's lifespan serving tinystore's queues on the app's own event loop with ``serve_async``.

    python examples/fastapi_lifespan.py           # runs the lifespan once, as a server would
    uvicorn examples.fastapi_lifespan:app         # with FastAPI and uvicorn installed

At startup the lifespan runs ``store.serve_async()`` as a task; at shutdown
``store.stop()`` claims no more and lets running handlers finish within the
grace period, then the task ends. The server handles SIGTERM and runs the
shutdown half of the lifespan, so the handlers get the same grace as under
``tinystore worker``. FastAPI is optional for this file: without it, running
it still drives the lifespan by hand.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import tinystore

store = tinystore.open(os.environ.get("TINYSTORE_FILE") or os.path.join(tempfile.mkdtemp(), "app.db"))
thumbnails = store.queue("thumbnails")


@thumbnails.work
async def make_thumbnail(payload: dict, run: tinystore.AsyncRun) -> None:
    print(f"worker  thumbnail of photo {payload['photo_id']} (attempt {run.attempt})", flush=True)


@asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    serving = asyncio.create_task(store.serve_async(grace="30s"))
    yield
    store.stop()   # claim no more; running handlers finish within the grace period
    await serving
    store.close()


try:
    from fastapi import FastAPI
except ImportError:
    app = None
else:
    app = FastAPI(lifespan=lifespan)

    @app.post("/photos/{photo_id}")
    def upload(photo_id: int) -> dict:  # a plain def: add() writes to disk, so it runs off the event loop
        job = thumbnails.add({"photo_id": photo_id}, id=f"thumb:{photo_id}")
        return {"job": job.id, "state": job.state}


async def demo() -> None:
    """What a server does: enter the lifespan, handle a request, leave the lifespan."""
    async with lifespan(app):
        thumbnails.add({"photo_id": 7}, id="thumb:7")
        async for job in thumbnails.watch_async("thumb:7"):
            print(f"client  {job.id} is {job.state}", flush=True)
    print("stopped")


if __name__ == "__main__":
    if app is None:
        print("FastAPI is not installed: driving the lifespan by hand", file=sys.stderr)
    asyncio.run(demo())
