"""FastAPI serving tinystore's queues in its lifespan, on the app's own event loop, with ``serve_async``.

    uvicorn --app-dir examples fastapi_lifespan:app   # with FastAPI and uvicorn installed
    python examples/fastapi_lifespan.py               # runs the lifespan once, as a server would

``POST /photos/{id}?name=cat.jpg`` writes the photo's row and adds the job
that makes its thumbnail in one transaction (``store.transaction_async()``,
awaited: the event loop serves other requests while the commit waits for
the disk): a photo that exists already (409) leaves neither. ``GET /photos/{id}`` shows the thumbnail once the job
is done. At startup the lifespan runs ``store.serve_async()`` as a task; at
shutdown (the server's SIGTERM) ``store.stop()`` claims no more and lets
running handlers finish within the grace period, as ``tinystore worker``
does. Without FastAPI, running this file still drives the lifespan by hand.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import tempfile
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Optional

import tinystore

store = tinystore.open(os.environ.get("TINYSTORE_FILE") or os.path.join(tempfile.mkdtemp(), "app.db"))
store.execute("create table if not exists photos (id integer primary key, name text not null, thumbnail text)")
thumbnails = store.queue("thumbnails", dedupe="1d")  # a done job is kept a day, to be looked at


@thumbnails.work
async def make_thumbnail(payload: dict, run: tinystore.AsyncRun) -> None:
    print(f"worker  thumbnail of photo {payload['photo_id']} (attempt {run.attempt})", flush=True)
    await asyncio.sleep(payload["seconds"])  # the time a thumbnail takes to make
    await run.transaction("thumbnail", lambda tx: tx.execute(
        "update photos set thumbnail = 'thumb-' || name where id = ?", (payload["photo_id"],)))


async def add_photo(photo_id: int, name: str, seconds: float = 0) -> Optional[tinystore.JobState]:
    """The photo's row and its thumbnail's job, in one commit; None where the photo exists: then the job
    added before the insert failed is rolled back with it."""
    try:
        async with store.transaction_async() as tx:
            job = await thumbnails.add_async({"photo_id": photo_id, "seconds": seconds}, tx=tx)
            await tx.execute("insert into photos (id, name) values (?, ?)", (photo_id, name))
    except sqlite3.IntegrityError:
        return None
    return job


@asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    serving = asyncio.create_task(store.serve_async(grace="30s"))
    yield
    store.stop()   # claim no more; running handlers finish within the grace period
    await serving
    store.close()


try:
    from fastapi import FastAPI, HTTPException
except ImportError:
    app = None
else:
    app = FastAPI(lifespan=lifespan)

    # Async routes: every call that waits for the disk is awaited (an _async twin), so the loop never stalls.
    @app.post("/photos/{photo_id}", status_code=201)
    async def upload(photo_id: int, name: str, seconds: float = 0) -> dict:
        job = await add_photo(photo_id, name, seconds)
        if job is None:
            raise HTTPException(409, f"photo {photo_id} exists")
        return {"job": job.id, "state": job.state}

    @app.get("/photos/{photo_id}")
    def photo(photo_id: int) -> dict:  # store.query has no twin: a plain def, which FastAPI runs in a thread
        rows = store.query("select name, thumbnail from photos where id = ?", (photo_id,))
        if not rows:
            raise HTTPException(404, f"no photo {photo_id}")
        return {"name": rows[0][0], "thumbnail": rows[0][1]}


async def demo() -> None:
    """What a server does: enter the lifespan, handle a request, leave the lifespan."""
    async with lifespan(app):
        job = await add_photo(7, "cat.jpg")
        assert job is not None and await add_photo(7, "cat.jpg") is None, "photo 7 was there before"
        async for state in thumbnails.watch_async(job.id):
            print(f"client  photo 7's thumbnail is {state.state}", flush=True)
        print(f"client  {store.query('select thumbnail from photos where id = 7')[0][0]}", flush=True)
    print("stopped")


if __name__ == "__main__":
    if app is None:
        print("FastAPI is not installed: driving the lifespan by hand", file=sys.stderr)
    asyncio.run(demo())
