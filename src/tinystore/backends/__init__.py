"""Backends: the databases a store can live in, behind one interface (``_base.Backend``).

``open_backend`` is the one place that picks a backend from what the user
gave ``tinystore.open``: a file path is a SQLite store (``sqlite/``), a
``postgresql://`` or ``postgres://`` URL a PostgreSQL one (``postgres/``).

For an operator's commands (``tinystore status STORE``...), which never make
a store of what they are given: ``open_existing`` opens a store that exists
already, for reading only where asked (it then writes nothing to it), and
``check`` says whether a SQLite store is damaged (a ``CheckReport``). They
pick the backend from the target as ``open_backend`` does. ``shown`` is a
target as messages show it, a URL never with its password; ``scrubbed`` a
message with a URL's password taken out wherever it is.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Optional

from .._errors import Error, InvalidArgument
from ._base import Backend

URL_SCHEMES = ("postgresql://", "postgres://")
DURABILITY = ("full", "normal", "off")  # what tinystore.open(durability=) takes; "full" unless given
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
LOCK_TIMEOUT = 30.0  # seconds a write waits for another process's write lock, unless open says otherwise


def open_backend(target: "str | os.PathLike[str]", *, durability: str, lock_timeout: float,
                 schema: Optional[str] = None) -> Backend:
    """The backend for ``target``: a SQLite file path (created where absent), or a PostgreSQL URL
    (``schema``: where tinystore's tables are, ``tinystore`` unless given)."""
    if isinstance(target, str) and target.startswith(URL_SCHEMES):
        return _postgres(target, durability, lock_timeout, schema)
    if schema is not None:
        raise InvalidArgument(f"schema={schema!r} is for a PostgreSQL URL; a SQLite store is one file")
    path = _path(target)
    try:
        from .sqlite import SQLiteBackend  # imported here: a backend's driver loads only when it is used
        return SQLiteBackend(path, durability, lock_timeout)
    except OSError as exc:  # what the checks before any write could not foresee: a race, no space, no descriptors
        where = f" ({exc.filename})" if exc.filename and exc.filename != os.path.abspath(path) else ""
        raise Error(f"cannot open the store {os.path.abspath(path)}: {exc.strerror or exc}{where}") from exc


def _postgres(url: str, durability: str, lock_timeout: float, schema: Optional[str]) -> Backend:
    schema = "tinystore" if schema is None else schema
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgument(f"schema={schema!r} must match [a-z_][a-z0-9_]{{0,62}}")
    try:
        from .postgres import PostgresBackend  # imported here: psycopg loads only for a PostgreSQL store
    except ImportError as exc:
        raise Error(f"a PostgreSQL store needs psycopg 3 and its pool: pip install \"tinystore[postgres]\" "
                    f"({exc})") from exc
    return PostgresBackend(url, schema, durability, lock_timeout)


def _path(target: Any) -> str:
    try:
        path = os.fspath(target)
    except TypeError:
        path = None
    if not isinstance(path, str) or not path or "\0" in path:
        raise InvalidArgument(f"the store's path must be a file path, not {target!r}")
    return path


# An operator's commands: a store that exists already

@dataclass(frozen=True)
class UnreadableJob:
    """A job whose id or payload cannot be read as the store keeps it, and why."""

    seq: int
    queue: str
    id: str
    why: str


@dataclass(frozen=True)
class CheckReport:
    """What a check of a store found.

    ``method`` names the check that ran (SQLite's ``integrity_check`` or
    ``quick_check``); ``pages`` and ``jobs`` are how many it read, or None
    where it could not; ``problems`` are what the database's own check said;
    ``advice``, where it is not ``ok``, says what to do.
    """

    location: str
    method: str
    ok: bool
    pages: Optional[int]
    jobs: Optional[int]
    problems: list[str]
    unreadable_jobs: list[UnreadableJob]
    advice: Optional[str]


def open_existing(target: "str | os.PathLike[str]", read_only: bool = False,
                  schema: Optional[str] = None) -> Backend:
    """The backend of the store at ``target``, which must exist already: never makes one.

    A SQLite file: a missing file, a directory, a file that is not a SQLite
    database or one without tinystore's tables is refused with
    ``InvalidArgument``, before anything writes to it; damage met meanwhile
    is ``StoreCorrupt``. ``read_only``: the backend registers nothing and
    writes nothing (its writes raise ``Error``), so it reads a store this
    process may not write; a store of an earlier version's tables is opened
    writable all the same, as its tables must be migrated first. Else it is
    opened as ``tinystore.open`` opens it, with its defaults.

    A PostgreSQL URL (``schema``: ``tinystore`` unless given; for a URL
    only): a URL that cannot be read, a server that cannot be reached or
    refuses the user, a database that does not exist and a schema without
    tinystore's tables are refused with ``InvalidArgument`` (one line naming
    host, port and database, never the password), after one read of the
    catalog on a connection of its own, which writes and creates nothing
    (``postgres._existing``). The store is then opened as ``tinystore.open``
    opens it, ``read_only`` or not: the database enforces what this user
    may read and write, and the one write of such an open, the process's
    registration (one row), is removed by its close. (So a user who may
    only read the schema is refused by the open, saying it cannot write.)
    """
    if is_url(target):
        schema = _schema_name("tinystore" if schema is None else schema)
        try:
            from .postgres import _existing  # imported here: psycopg loads only for a PostgreSQL store
        except ImportError as exc:
            raise Error(f"a PostgreSQL store needs psycopg 3 and its pool: pip install \"tinystore[postgres]\" "
                        f"({exc})") from exc
        _existing.check_store(target, schema)
        return open_backend(target, durability="full", lock_timeout=LOCK_TIMEOUT, schema=schema)
    if schema is not None:
        raise InvalidArgument(f"schema={schema!r} is for a PostgreSQL URL; a SQLite store is one file")
    path = _path(target)
    from .sqlite import _files, _readonly
    _files.check_store(path)
    if read_only:
        backend = _readonly.open_read_only(path)
        if backend is not None:
            return backend
    return open_backend(path, durability="full", lock_timeout=LOCK_TIMEOUT)


def check(target: "str | os.PathLike[str]", *, quick: bool = False, limit: int = 100) -> CheckReport:
    """Read every page of the SQLite store at ``target`` and each of its jobs, writing nothing: what was found.

    ``quick``: a faster check that does not compare every index with its
    table; ``limit``: at most this many problems are read from the database's
    own check. A target that is not an existing store is ``InvalidArgument``;
    so is a PostgreSQL URL: the server checks its own pages (data checksums,
    ``pg_amcheck``), and reads no page it cannot verify, so there is nothing
    of SQLite's kind to check from here.
    """
    if is_url(target):
        raise InvalidArgument(f"tinystore check reads the pages of a SQLite store file, and {shown(target)} is "
                              f"a PostgreSQL database: the server checks its own pages (enable data checksums; "
                              f"run pg_amcheck)")
    path = _path(target)
    from .sqlite import _check
    return _check.check(path, quick=quick, limit=limit)


def is_url(target: Any) -> bool:
    """Whether ``target`` names a PostgreSQL store (a ``postgresql://`` or ``postgres://`` URL)."""
    return isinstance(target, str) and target.startswith(URL_SCHEMES)


def _schema_name(schema: Any) -> str:
    if not isinstance(schema, str) or not SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgument(f"schema {schema!r} must match [a-z_][a-z0-9_]{{0,62}}")
    return schema


def shown(target: Any) -> str:
    """``target`` as a message shows it: a PostgreSQL URL without its password, a path as it is.

    ``postgresql://user:secret@host/db`` is shown as ``postgresql://user@host/db``
    (all of the userinfo after the user's name goes, up to the last ``@`` before
    the query), and a ``password=`` parameter of the query is left out.
    """
    if not is_url(target):
        try:
            return os.fspath(target)
        except TypeError:
            return repr(target)
    scheme, _, rest = target.partition("://")
    ends = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
    at = rest.rfind("@", 0, min(ends) if ends else len(rest))
    if at >= 0:
        user = rest[:at].partition(":")[0]
        rest = (user + "@" if user else "") + rest[at + 1:]
    base, question, query = rest.partition("?")
    if question:
        query, hash_, fragment = query.partition("#")
        kept = [p for p in query.split("&") if p and p.partition("=")[0].lower() != "password"]
        rest = base + ("?" + "&".join(kept) if kept else "") + hash_ + fragment
    return f"{scheme}://{rest}"


def scrubbed(text: str, target: Any) -> str:
    """``text`` with ``target``'s password hidden: the URL shown as ``shown`` shows it wherever it appears
    whole, and a quoted token of the text (as libpq quotes what it cannot read: ``"se%zzret"``) that holds
    the password or is part of it, as ``***``. A text about a path is returned as it is."""
    if not is_url(target):
        return text
    text = text.replace(target, shown(target))
    secrets = [secret for secret in _secrets(target) if secret]
    if not secrets:
        return text

    def hide(found: "re.Match[str]") -> str:
        token = found.group(1)
        if any(token and (token in secret or secret in token) for secret in secrets):
            return '"***"'
        return found.group(0)
    text = re.sub(r'"([^"]*)"', hide, text)
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _secrets(url: str) -> list[str]:
    """What ``shown`` takes out of ``url``: the userinfo after the user's name, and ``password=`` values."""
    rest = url.partition("://")[2]
    ends = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
    at = rest.rfind("@", 0, min(ends) if ends else len(rest))
    found = []
    if at >= 0 and ":" in rest[:at]:
        found.append(rest[:at].partition(":")[2])
    query = rest.partition("?")[2].partition("#")[0]
    found += [p.partition("=")[2] for p in query.split("&") if p.partition("=")[0].lower() == "password"]
    return found
