"""A PostgreSQL store that exists already, for an operator's command: told before the backend opens it.

``tinystore.open(url)`` makes tinystore's tables in the database where they
are absent; an operator's command (``tinystore status URL``...) never does: a
typo in the URL, the database or ``--schema`` must not become an empty store.
``check_store`` makes one connection of its own, reads the catalog (no
statement of it writes, nor takes a lock a store's processes wait for), and
closes it; only then is the store opened as ``tinystore.open`` opens it.

Every message names the server by host, port and database, never with the
URL's password.
"""

from __future__ import annotations

import getpass
import os
import re
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..._errors import InvalidArgument
from .._targets import scrubbed, shown

CONNECT_TIMEOUT = 10  # seconds, unless the URL says connect_timeout=
TABLES = ("migrations", "queues", "jobs", "leases")  # a schema with all of these holds tinystore's tables

_SCHEMAS_WITH_TABLES = """
SELECT n.nspname
FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid
WHERE c.relkind IN ('r', 'p') AND c.relname = ANY(%s)
GROUP BY n.nspname HAVING count(DISTINCT c.relname) = %s
ORDER BY n.nspname
"""


def check_store(url: str, schema: str = "tinystore") -> None:
    """Refuse, with one line of ``InvalidArgument``, a URL whose schema does not hold tinystore's tables:
    a URL that cannot be read, a server that cannot be reached (or refuses the user), a database that does
    not exist, a schema that does not exist or holds no tinystore tables. Writes nothing, creates nothing."""
    params = _params(url)
    server = _server(params)
    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in params:
        kwargs["connect_timeout"] = CONNECT_TIMEOUT
    if "application_name" not in params:
        kwargs["application_name"] = f"tinystore check {schema}"[:63]
    try:
        conn = psycopg.connect(url, **kwargs)
    except psycopg.Error as exc:
        reason = scrubbed(str(exc), url)
        if exc.sqlstate == "3D000" or re.search(r'database "[^"]*" does not exist', reason):
            raise InvalidArgument(f"no {server}: not a tinystore store (a command never creates one)") from None
        raise InvalidArgument(f"cannot connect to {server}: {_reason(reason)}") from None
    try:
        with conn:
            found = [name for (name,) in conn.execute(_SCHEMAS_WITH_TABLES, (list(TABLES), len(TABLES)))]
            exists = conn.execute("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s",
                                  (schema,)).fetchone() is not None
    except psycopg.Error as exc:
        raise InvalidArgument(f"cannot read the catalog of {server}: "
                              f"{_reason(scrubbed(str(exc), url))}") from None
    if schema in found:
        return
    what = f"has no schema {schema!r}" if not exists else f"has no tinystore tables in schema {schema!r}"
    others = f" (its schemas with tinystore's tables: {', '.join(found)}; name one with --schema)" if found else ""
    raise InvalidArgument(f"{server} {what}: not a tinystore store{others}")


def _params(url: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise InvalidArgument(f"the PostgreSQL URL {shown(url)} cannot be read: "
                              f"{_reason(scrubbed(str(exc), url))}") from None


def _hostport(params: dict[str, Any]) -> str:
    """Where libpq connects, as the URL or else its environment says (localhost where neither does)."""
    host = params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "localhost"
    return f"{host}:{params.get('port') or os.environ.get('PGPORT') or '5432'}"


def _dbname(params: dict[str, Any]) -> str:
    """The database libpq connects to: the URL's, PGDATABASE, else the user's name."""
    name = params.get("dbname") or os.environ.get("PGDATABASE") or params.get("user") or os.environ.get("PGUSER")
    if not name:
        try:
            name = getpass.getuser()
        except Exception:  # no name for this uid
            name = ""
    return str(name)


def _server(params: dict[str, Any]) -> str:
    return f"database {_dbname(params)!r} on the PostgreSQL server at {_hostport(params)}"


def _reason(text: str) -> str:
    """The server's or libpq's reason in one line, without psycopg's 'connection failed: '."""
    line = " ".join(text.split())
    return line[len("connection failed: "):] if line.startswith("connection failed: ") else line
