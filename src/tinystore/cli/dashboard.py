"""Serve the dashboard of a store, a web page of its queues and jobs, until SIGINT or SIGTERM.

It binds 127.0.0.1 unless --host says otherwise, and prints its address
once it serves (with ``--port 0``, the port the system picked). SIGINT or
SIGTERM ends the open event streams within a few seconds, closes the store
and exits 0. Actions that change jobs
need the token: --token, else TINYSTORE_TOKEN, else one made now and
printed, in an address that hands it to the page (after ``#``, which a
browser never sends to a server).
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
from typing import Any

from tinystore import backends

from ._common import CommandError, add_store_argument, open_store

NAME = "dashboard"
HELP = "serve a web page of the store's queues and jobs: tinystore dashboard app.db"

GRACE = 2  # seconds open streams get to end when it stops


def configure(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8080, help="the port (default 8080; 0: a free one)")
    parser.add_argument("--token", help="the token actions need (default: TINYSTORE_TOKEN, else a new one)")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return port


def run(args: argparse.Namespace) -> int:
    try:
        import starlette  # noqa: F401 -- what tinystore.web is built on
        import uvicorn
    except ModuleNotFoundError:
        raise CommandError('the dashboard needs Starlette and uvicorn: pip install "tinystore[web]"') from None
    from tinystore import web
    token = args.token or os.environ.get("TINYSTORE_TOKEN") or ""
    made = not token.strip()
    if made:
        token = secrets.token_urlsafe(18)
    with open_store(args) as store:
        app = web.app(store, token=token)
        listening = _listen(args.host, args.port)
        host, port = listening.getsockname()[:2]
        address = f"http://{f'[{host}]' if ':' in host else host}:{port}/"
        lines = [f"tinystore dashboard of {backends.shown(store.location)} at {address}"]
        if made:
            lines.append(f"token for actions: {token} (open {address}#token={token} to hand it to the page)")

        class Server(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets)
                if self.started:  # serving, and SIGINT and SIGTERM stop it gracefully from now on
                    print("\n".join(lines), flush=True)

        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=GRACE)
        for sig in (signal.SIGINT, signal.SIGTERM):  # uvicorn stops on it, then raises it again here:
            signal.signal(sig, lambda *_: None)      # it was handled, and the store closes as it should
        Server(config).run(sockets=[listening])
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, or the one-line reason it cannot."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listening = socket.socket(family, socket.SOCK_STREAM)
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(128)
    except OSError as exc:
        raise CommandError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    return listening
