"""Connections to a store file: the pragmas every connection needs, and waiting out SQLITE_BUSY."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from urllib.parse import quote

from ..._errors import Error, InvalidArgument, StoreCorrupt

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT = 5.0  # SQLite's own busy handler waits this long before we retry
# The files beside a store that SQLite (WAL) and tinystore (the liveness locks, see _liveness) make.
BESIDE = ("-wal", "-shm", "-tinystore.lock")


def connect(path: str, synchronous: str) -> sqlite3.Connection:
    """A connection in autocommit mode: tinystore issues BEGIN and COMMIT itself.

    The file must exist (the backend creates it, owner-only): a connection
    never creates one, so a file removed meanwhile is an error, not a new
    store with SQLite's default permissions.
    """
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=rw", uri=True, timeout=BUSY_TIMEOUT,
                               isolation_level=None, check_same_thread=False, cached_statements=256)
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode != sqlite3.SQLITE_CANTOPEN:
            raise
        raise Error(f"cannot open the store {path}: {exc}") from None
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    return conn


def is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc))


def begin_immediate(conn: sqlite3.Connection) -> None:
    """Take the write lock up front, waiting as long as another writer holds it.

    Users never see "database is locked": a connection whose busy handler
    gives up (after BUSY_TIMEOUT, or at once for the writer, see
    ``poll_for_the_write_lock``) tries again here, in steps of 0.1 to 2 ms.
    """
    pause = 0.0001
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.002)


def poll_for_the_write_lock(conn: sqlite3.Connection) -> None:
    """Let ``begin_immediate`` wait for the write lock on this connection, not SQLite's busy handler.

    The busy handler sleeps 1, 2, 5, 10... ms between tries: while another
    process holds the lock for a fraction of a millisecond per transaction,
    a worker would spend most of its time asleep. The writer runs nothing
    that waits for a lock but BEGIN IMMEDIATE.
    """
    conn.execute("PRAGMA busy_timeout = 0")


def check_file(path: str) -> None:
    """Refuse a path that cannot be a store, or a file that is not a SQLite database, before anything
    creates or writes a byte.

    ``path`` is absolute. A store is a regular file, readable and writable,
    in a folder where the files SQLite and tinystore keep beside it can be
    made; they live beside the file's real name, as SQLite resolves links.
    """
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    try:
        folder_mode = os.stat(folder).st_mode
    except FileNotFoundError:
        raise InvalidArgument(f"cannot open the store {path}: its folder {folder} does not exist") from None
    except OSError as exc:  # a file on the way, a folder that cannot be searched, a link loop
        raise InvalidArgument(f"cannot open the store {path}: {_why(exc)}") from None
    if not stat.S_ISDIR(folder_mode):
        raise InvalidArgument(f"cannot open the store {path}: {folder} is not a folder")
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise InvalidArgument(f"cannot open the store {path}: {_why(exc)}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise InvalidArgument(f"{path} is a directory, not a store file")
    if mode is not None and not stat.S_ISREG(mode):
        raise InvalidArgument(f"{path} is not a regular file (a device, a pipe or a socket): a store is a file")
    files = [real] + [real + end for end in BESIDE]
    missing = [name for name in files if not os.path.lexists(name)]
    if missing and not _may(folder, os.W_OK | os.X_OK):
        why = "is on a read-only file system" if _read_only_fs(folder) else "is not writable by this process"
        raise InvalidArgument(f"cannot open the store {path}: its folder {folder} {why}, and tinystore "
                              f"must make {os.path.basename(missing[0])} there")
    for name in files:
        if name in missing:
            continue
        what = "the store file" if name == real else os.path.basename(name)
        if name != real and not os.path.isfile(name):
            raise InvalidArgument(f"cannot open the store {path}: {name}, where tinystore keeps a file beside "
                                  f"the store, is not a regular file")
        if not _may(name, os.R_OK):
            raise InvalidArgument(f"cannot open the store {path}: permission denied reading {what}")
        if not _may(name, os.W_OK):
            why = "it is on a read-only file system" if _read_only_fs(folder) else "it is read-only"
            raise InvalidArgument(f"cannot open the store {path}: tinystore writes to {what}, and {why}")
    if mode is None:
        return
    try:
        with open(real, "rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise InvalidArgument(f"cannot open the store {path}: {_why(exc)}") from None
    if header and header != SQLITE_HEADER:
        raise StoreCorrupt(f"{path} is not a SQLite database: its header is {header[:16]!r}")


def _may(path: str, mode: int) -> bool:
    """Whether this process may access ``path`` so (by its effective ids, where the system can tell)."""
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)


def _read_only_fs(folder: str) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _why(exc: OSError) -> str:
    """An OS error as a phrase that names the file it is about."""
    where = f": {exc.filename}" if exc.filename else ""
    return f"{(exc.strerror or str(exc)).lower()}{where}"


def corrupt(path: str, exc: sqlite3.DatabaseError) -> StoreCorrupt:
    return StoreCorrupt(f"{path} is damaged or not a SQLite database: {exc}")
