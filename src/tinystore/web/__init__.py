"""The dashboard: a web page for a store, as an ASGI app (``pip install "tinystore[web]"``).

``tinystore dashboard STORE`` serves it; ``app(store, token=...)`` mounts it in
an application's own FastAPI or Starlette app, under any path:

    application.mount("/jobs", tinystore.web.app(store, token=os.environ["TINYSTORE_TOKEN"]))

The package's modules:

- ``_views``   what the page shows, read through the store's public API, as JSON; input checked
- ``_feed``    one change feed per app: the store's notices, one read per view, told to every browser
- ``_app``     the Starlette app: the page, its reads, its event stream, its actions behind the token
- ``static/``  the page: index.html, dashboard.js, dashboard.css (no build step, nothing fetched elsewhere)
"""

from __future__ import annotations

from typing import Any

from .._errors import InvalidArgument
from .._store import Store

INSTALL = 'the dashboard needs Starlette: pip install "tinystore[web]"'


def app(store: Store, *, token: str) -> Any:
    """The dashboard of ``store`` as an ASGI app. Actions (retry, cancel) need ``token`` in the
    ``X-Tinystore-Token`` header of their POST; a request without it changes nothing (403)."""
    if not isinstance(store, Store):
        raise InvalidArgument(f"app() takes a tinystore.Store, not {store!r}")
    if not isinstance(token, str) or not token.strip():
        raise InvalidArgument("app() needs a token, a non-empty string, for the actions that change jobs")
    try:
        from ._app import build
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("starlette", "anyio"):
            raise ModuleNotFoundError(INSTALL, name=exc.name) from None
        raise
    return build(store, token)
