"""Connections to a store file: the pragmas every connection needs, waiting out SQLITE_BUSY within
``lock_timeout``, and the errors of the database and the file system as tinystore errors."""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import stat
import time
from typing import Optional
from urllib.parse import quote

from ._damage import damaged
from .._targets import LOCK_TIMEOUT
from ..._errors import DiskError, DiskFull, Error, InvalidArgument, Locked, ReadOnly, StoreCorrupt

log = logging.getLogger("tinystore.store")

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT = 5.0  # SQLite's own busy handler waits this long before we retry
LOCK_WARNING = 5.0  # a wait this long for the write lock is logged, once per wait
# The files beside a store that SQLite (WAL) and tinystore (the liveness locks, see _liveness) make.
BESIDE = ("-wal", "-shm", "-tinystore.lock")


class Connection(sqlite3.Connection):
    """A connection that knows its store's path and how long it waits for the write lock."""

    path: str
    lock_timeout: float


def connect(path: str, synchronous: str, lock_timeout: float = LOCK_TIMEOUT) -> Connection:
    """A connection in autocommit mode: tinystore issues BEGIN and COMMIT itself.

    The file must exist (the backend creates it, owner-only): a connection
    never creates one, so a file removed meanwhile is an error, not a new
    store with SQLite's default permissions.
    """
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=rw", uri=True, timeout=min(BUSY_TIMEOUT, lock_timeout),
                               isolation_level=None, check_same_thread=False, cached_statements=256,
                               factory=Connection)
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode != sqlite3.SQLITE_CANTOPEN:
            raise translated(exc, path) from None
        raise Error(f"cannot open the store {path}: {exc}") from None
    conn.path = path
    conn.lock_timeout = lock_timeout
    try:
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    except sqlite3.Error as exc:
        conn.close()
        raise translated(exc, path) from None
    return conn


def is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc))


def begin_immediate(conn: sqlite3.Connection) -> None:
    """Take the write lock up front, waiting for another writer to give it up, at most ``lock_timeout``.

    Users never see "database is locked": a connection whose busy handler
    gives up (after BUSY_TIMEOUT, or at once for the writer, see
    ``poll_for_the_write_lock``) tries again here, in steps of 0.1 to 2 ms.
    Past ``lock_timeout`` (30 s unless ``open`` was told otherwise) it raises
    ``Locked``: a process stopped or stuck while it holds the lock would make
    every write of every other process wait for ever. A wait of more than
    5 s is logged, once.
    """
    pause = 0.0001
    began = time.monotonic()  # before the first try: SQLite's own busy handler may wait in it
    warned = False
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            if warned:
                log.info("the write lock of %s was given up after %.1fs: writes go on", path_of(conn),
                         time.monotonic() - began)
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise translated(exc, path_of(conn), timeout_of(conn)) from None
        waited = time.monotonic() - began
        timeout = timeout_of(conn)
        if waited >= timeout:
            raise locked(path_of(conn), timeout)
        if waited >= LOCK_WARNING and not warned:
            warned = True
            log.warning("another process has held the write lock of %s for %.0fs; waiting up to %gs "
                        "(lock_timeout)", path_of(conn), waited, timeout)
        time.sleep(pause)
        pause = min(2 * pause, 0.002)


def locked(path: str, timeout: Optional[float], queue: Optional[str] = None) -> Locked:
    held = f"for more than {timeout:g}s (lock_timeout)" if timeout is not None else "for too long"
    return Locked(f"another process has held the write lock of the store {path} {held}, so nothing was "
                  f"written: it may be stopped (SIGSTOP, a debugger) or stuck in a long transaction, and which "
                  f"process it is cannot be told from the store (`fuser {path}` lists the processes that have it "
                  f"open). Let it go on or end it, or give tinystore.open(..., lock_timeout=...) a longer wait",
                  queue=queue)


def translated(exc: BaseException, path: str, lock_timeout: Optional[float] = None,
               queue: Optional[str] = None) -> BaseException:
    """A database or file-system error as the tinystore error that says what happened and what to do
    (naming ``queue``, where given).

    An error about the SQL itself (a syntax error, a constraint) is not the
    store's: it is returned as it is, for its caller to see.
    """
    if isinstance(exc, Error):
        return exc
    if isinstance(exc, OSError):
        return _chained(_os_error(exc, path, queue), exc)
    if not isinstance(exc, sqlite3.Error):
        return exc
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    detail = f"{exc}; {_name(exc)}"
    if primary == sqlite3.SQLITE_FULL or code == sqlite3.SQLITE_IOERR_SHMSIZE:
        error: Error = DiskFull(f"no space is left on the device that holds the store {path}, so nothing was "
                                f"written ({exc}): free some space, then try again", queue=queue)
    elif primary == sqlite3.SQLITE_IOERR and _read_only_fs(os.path.dirname(os.path.realpath(path))):
        error = ReadOnly(f"the store {path} cannot be written: its file system is read-only now (remounted "
                         f"read-only, perhaps after errors) ({detail}): check the disk and the system log, and "
                         f"remount it read-write", queue=queue)
    elif primary == sqlite3.SQLITE_IOERR:
        error = DiskError(f"the disk reported an I/O error on the store {path}, so nothing was written "
                          f"({detail}): check the disk and the system log, then try again", queue=queue)
    elif primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        error = ReadOnly(f"the store {path} cannot be written: its file, a file beside it (-wal, -shm) or its "
                         f"folder is read-only (permissions, a read-only mount or chattr +i) ({detail}): make "
                         f"them writable by this process", queue=queue)
    elif primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return damaged(path, exc, queue)
    elif primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        error = locked(path, lock_timeout, queue)
    elif primary == sqlite3.SQLITE_CANTOPEN:
        error = Error(f"cannot open the store {path}, or a file beside it ({exc}): check that its folder and "
                      f"files are there and that this process may use them", queue=queue)
    else:
        return exc
    return _chained(error, exc)


def _os_error(exc: OSError, path: str, queue: Optional[str]) -> Error:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"no space is left on the device that holds the store {path}, so nothing was written "
                        f"({_why(exc)}): free some space, then try again", queue=queue)
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ReadOnly(f"the store {path} cannot be written ({_why(exc)}): make its folder and files writable "
                        f"by this process", queue=queue)
    if exc.errno == errno.EIO:
        return DiskError(f"the disk reported an I/O error on the store {path} ({_why(exc)}): check the disk and "
                         f"the system log, then try again", queue=queue)
    return Error(f"the store {path}: {_why(exc)}", queue=queue)


def naming(error: Error, queue: str) -> Error:
    """``error`` as the same error about ``queue``."""
    try:
        named = type(error)(str(error), queue=queue)
    except TypeError:  # an Error subclass with a constructor of its own
        return error
    named.__cause__ = error.__cause__
    named.__suppress_context__ = True
    return named


def _chained(error: Error, cause: BaseException) -> Error:
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error


def _name(exc: sqlite3.Error) -> str:
    return getattr(exc, "sqlite_errorname", None) or type(exc).__name__


def path_of(conn: sqlite3.Connection) -> str:
    """The store's path a connection was opened on, for messages."""
    return getattr(conn, "path", "(the store)")


def timeout_of(conn: sqlite3.Connection) -> float:
    """How long a connection waits for the write lock (its store's lock_timeout)."""
    return getattr(conn, "lock_timeout", LOCK_TIMEOUT)


def poll_for_the_write_lock(conn: sqlite3.Connection) -> None:
    """Let ``begin_immediate`` wait for the write lock on this connection, not SQLite's busy handler.

    The busy handler sleeps 1, 2, 5, 10... ms between tries: while another
    process holds the lock for a fraction of a millisecond per transaction,
    a worker would spend most of its time asleep. The writer runs nothing
    that waits for a lock but BEGIN IMMEDIATE.
    """
    conn.execute("PRAGMA busy_timeout = 0")


def check_file(path: str) -> None:
    """Refuse a path that cannot be a store before anything creates or writes a byte.

    ``path`` is absolute. A store is a regular file, readable and writable,
    in a folder where the files SQLite and tinystore keep beside it can be
    made; they live beside the file's real name, as SQLite resolves links.
    Whether it is a SQLite database is SQLite's first read to tell, at open:
    a descriptor of the file opened here would drop, when closed, every POSIX
    lock this process holds on it, SQLite's own too (where the store, or the
    application's connection, has it open already), and another process's
    close could then take itself for the last and delete the WAL under them.
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


def not_a_database_said(exc: BaseException) -> bool:
    """Whether SQLite refused the file as no database (SQLITE_NOTADB: it cannot read its first page)."""
    cause = (exc.__cause__ or exc.__context__) if isinstance(exc, StoreCorrupt) else exc
    code = getattr(cause, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_NOTADB


def not_a_database(path: str) -> Optional[StoreCorrupt]:
    """Once SQLite refused the existing file at ``path`` as no database: whether it is no SQLite file at
    all (its first bytes say so), rather than a damaged one. Read only then (see ``check_file``): no
    connection can hold locks worth keeping on a file whose first page SQLite cannot read."""
    try:
        with open(os.path.realpath(path), "rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError:
        return None  # SQLite's refusal says what is known
    if header == SQLITE_HEADER:
        return None
    return StoreCorrupt(f"{path} is not a SQLite database: its header is {header[:16]!r}")


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


def corrupt(path: str, exc: sqlite3.DatabaseError) -> Error:
    """What a database error while opening the store means: damage, unless it says what else it is (no
    space, a read-only file, a lock held too long), which is not damage."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF not in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB,
                                                     sqlite3.SQLITE_ERROR):
        found = translated(exc, path)
        if isinstance(found, Error):
            return found
    return StoreCorrupt(f"{path} is damaged or not a SQLite database: {exc}")
