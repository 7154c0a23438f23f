"""The store in a Django database: its SQLite file, or its PostgreSQL database, opened once per process."""

from __future__ import annotations

import atexit
import threading
from typing import Any, Optional
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.db.backends.base.base import NO_DB_ALIAS
from django.tasks import task_backends

import tinystore

_lock = threading.Lock()
_stores: dict[tuple[str, Optional[str], Optional[str]], tinystore.Store] = {}


def store_for(database: str, schema: Optional[str], direct: Optional[str] = None) -> tinystore.Store:
    """The store in the Django database ``database`` (an alias of DATABASES), opened on first use
    (``direct``: the URL that reaches its server itself, where the database's HOST is a pooler)."""
    target = target_of(database)
    with _lock:
        store = _stores.get((target, schema, direct))
        if store is None:
            store = _stores[(target, schema, direct)] = tinystore.open(target, schema=schema, direct=direct)
            atexit.register(store.close)  # the process's registration ends with it, not at the next open
        return store


def close_stores_in(target: str) -> None:
    """Close this process's stores in ``target``; the next use opens them again."""
    with _lock:
        stores = [_stores.pop(key) for key in list(_stores) if key[0] == target]
    for store in stores:
        store.close()


def on_connect(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Django connected to a database: make its queues ready, and its stores close before it is destroyed."""
    if connection.vendor in ("sqlite", "postgresql") and connection.alias != NO_DB_ALIAS:
        close_before_destroying(connection)
        prepare_on_connect(connection)


def close_before_destroying(connection: Any) -> None:
    """Close the stores in a test database before Django's test runner destroys it: the sessions of a
    PostgreSQL store would make DROP DATABASE fail, and a SQLite file deleted under an open store leaves
    its WAL behind, which the next run's store refuses. Django has no signal for it: its connection's
    ``creation.destroy_test_db`` is wrapped, once per connection."""
    creation = connection.creation
    if getattr(creation, "_closes_tinystore", False):
        return
    destroy = creation.destroy_test_db

    def destroy_test_db(*args: Any, **kwargs: Any) -> Any:
        try:
            close_stores_in(target_of(connection.alias))
        except ImproperlyConfigured:  # a database in memory: no store was opened in it
            pass
        return destroy(*args, **kwargs)

    creation.destroy_test_db = destroy_test_db
    creation._closes_tinystore = True


def prepare_on_connect(connection: Any) -> None:
    """Open the store and the QUEUES of each tinystore task backend in a SQLite database Django has just
    connected to, in this thread (Django's task backends are per thread, as its connections are).

    Opening a store, and a queue's options, write to the file; inside
    ``transaction.atomic`` Django's connection holds the file's write lock, so
    a task enqueued there finds them ready (on PostgreSQL they are made on
    first use). A database in memory has no store: enqueueing says so.
    """
    if connection.vendor != "sqlite" or _in_memory(str(connection.settings_dict["NAME"])):
        return
    from ._backend import TaskBackend
    for backend in task_backends.all():
        if isinstance(backend, TaskBackend) and backend.database == connection.alias:
            for name in backend.queues:
                backend.queue(name)


def target_of(database: str) -> str:
    """What ``tinystore.open`` takes for a Django database: SQLite's file, or a PostgreSQL URL."""
    if database not in connections.settings:
        raise ImproperlyConfigured(f"the tinystore task backend's database {database!r} is not in DATABASES")
    connection = connections[database]
    settings = connection.settings_dict  # as the test runner changed it, too
    if connection.vendor == "sqlite":
        name = str(settings["NAME"])
        if _in_memory(name):
            raise ImproperlyConfigured(f"the tinystore task backend needs database {database!r} in a file, not "
                                       f"in memory: workers in other processes read its jobs")
        return name
    if connection.vendor == "postgresql":
        return postgres_url(settings)
    raise ImproperlyConfigured(f"the tinystore task backend keeps its jobs in SQLite or PostgreSQL; database "
                               f"{database!r} is {connection.vendor}")


def _in_memory(name: str) -> bool:
    return name == ":memory:" or "mode=memory" in name


def postgres_url(settings: dict[str, Any]) -> str:
    """A ``postgresql://`` URL from Django's NAME, USER, PASSWORD, HOST and PORT (a HOST that is a
    folder is a Unix socket's, given as ``?host=``)."""
    user, password = settings.get("USER") or "", settings.get("PASSWORD") or ""
    auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    host, port = str(settings.get("HOST") or ""), str(settings.get("PORT") or "")
    socket = host.startswith("/")
    where = ("" if socket else quote(host, safe="")) + (f":{port}" if port else "")
    url = f"postgresql://{auth + '@' if auth else ''}{where}/{quote(str(settings['NAME']), safe='')}"
    return url + (f"?host={quote(host, safe='')}" if socket else "")
