"""One store, one file, one name, one process: what the backend checks so that commits are not lost.

SQLite keeps a file's WAL and shared memory beside the name it is opened by
(``-wal``, ``-shm``), and tinystore its lock file (``-tinystore.lock``). So:

- **Two names of one file** (a hard link, a bind mount of the file) would
  each get a WAL of their own, and commits through one name would be lost to
  the other. ``check_names`` refuses, at open, a file with more than one
  hard link and a file that is a mount point, or is mounted elsewhere in this
  process's view (where ``/proc/self/mountinfo`` tells).
- **A file deleted, renamed or replaced while open** would go on taking
  commits no later open sees. ``FileWatch.check`` compares, after each
  commit of the writer and before each ``store.transaction()`` commits, what
  the path names now with the file opened (one ``os.stat``); from the first
  difference on every write raises ``StoreGone``.
- **A WAL left by the file that was there before**: SQLite would replay it
  onto whatever file has the name now. The lock file records the store file
  it belongs to (``_liveness.LockFile.record``); ``guard_wal`` refuses to open
  a file that replaced the one recorded while a process still holds that one
  open, or while a WAL of it is left beside.
- **A fork**: a child gets a copy of its parent's connections, writer and
  registration, and of SQLite's own bookkeeping of the locks the parent held.
  ``after_fork_in_child`` marks every store open in the parent as the
  parent's: in the child, using one raises an ``Error``, and closing one only
  lets go of it; its connections are never closed there (SQLite could wait
  for ever on a mutex a thread of the parent held, or take locks that are the
  parent's). Opening again, in the child, a file the parent had open is
  refused too: SQLite in the child believes it holds the parent's locks on
  that file, so a new connection there would not take them, and the parent's
  close could then delete the WAL under it.

And the registered processes (``alive``): a process's liveness is a byte of
the lock file it found at open; each keeps with its registration the
identities of the store file and of that lock file, so that a lock file
deleted or replaced since, or a store file copied elsewhere, never makes a
live process look dead, nor keeps a process of another file alive.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import weakref
from typing import Any, Optional

from ..._errors import Error, InvalidArgument, StoreGone
from . import _liveness
from ._liveness import Identity, LockFile

log = logging.getLogger("tinystore.store")


# Names

def check_names(path: str, real: str) -> os.stat_result:
    """Refuse a store file reachable by more than one name; return its stat."""
    st = os.stat(real)
    if st.st_nlink > 1:
        raise InvalidArgument(
            f"cannot open the store {path}: the file has {st.st_nlink} hard links (other names). SQLite "
            f"keeps a WAL beside each name a file is opened by, so two names would each commit to a WAL of "
            f"their own and lose jobs; remove the other links and open it by one name")
    other = _mounted_as(real, st)
    if other is not None:
        raise InvalidArgument(
            f"cannot open the store {path}: the file is {other}. SQLite keeps the store's -wal and -shm "
            f"beside the name it is opened by, so each name would have its own and lose jobs (and a file "
            f"mounted into a container has its WAL in the container); mount the folder that holds it, "
            f"not the file")
    return st


def _mounted_as(real: str, st: os.stat_result) -> Optional[str]:
    """How the file is also reachable through a bind mount, where this process can see it."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().decode("utf-8", "surrogateescape").splitlines()
    except OSError:  # not Linux, or no /proc
        return None
    device = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if point == real:
            return f"a mount point (of {root}, bind-mounted onto {real})"
        if fields[2] != device or root == "/":
            continue  # not this file's file system, or a whole file system mounted
        try:
            there = os.stat(point)
        except OSError:
            continue
        if stat.S_ISREG(there.st_mode) and Identity.of(there) == Identity.of(st):
            return f"bind-mounted onto {point} as well"
    return None


def _unescape(field: str) -> str:
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


# The WAL beside the file

def _wal_with_commits(real: str) -> Optional[str]:
    """The WAL beside the file's real name, where it holds anything."""
    wal = real + "-wal"
    return wal if os.path.exists(wal) and os.path.getsize(wal) > 0 else None


def refuse_orphan_wal(path: str, real: str) -> None:
    """Refuse to make a new store file beside a WAL, which SQLite would then delete (a WAL beside an
    empty file is dropped), and with it the last commits of the file that had the name."""
    wal = _wal_with_commits(real)
    if wal is not None:
        raise Error(
            f"cannot open the store {path}: the store file is missing, but {wal} is beside its name: the "
            f"store was deleted or renamed while a process had it open, and what that process wrote last "
            f"is in that WAL, which a new store here would delete. Give the file its name back to keep "
            f"it, or move {wal} and {real}-shm aside to make a new store here")


def guard_wal(path: str, real: str, file: Identity, lock: LockFile) -> None:
    """Refuse to let SQLite replay onto this file a WAL of the file that had its name before.

    Called, where the lock file exists, before any connection opens the
    file: a connection that reads would take that WAL for the file's own,
    and its last close would checkpoint it into the file. The open records
    the file in the lock file once it succeeded (``LockFile.record``).
    """
    recorded = lock.recorded()
    if recorded is not None:
        was, its_lock = recorded
        # Where the lock file is not the one the record was written in, the folder was copied or
        # restored, and what is beside the file came with it.
        if was != file and its_lock == lock.identity:
            if lock.any_held():
                raise Error(
                    f"cannot open the store {path}: it is not the file that was there when the processes "
                    f"that have it open opened it (it was replaced, or renamed over). They still write to "
                    f"the file they opened, in a WAL beside this name, which SQLite would replay onto this "
                    f"one: stop them (`fuser {lock.path}` lists them), then open it again")
            wal = _wal_with_commits(real)
            if wal is not None:
                raise Error(
                    f"cannot open the store {path}: {wal} was left by the file that was there before "
                    f"(this one replaced it, or was renamed over it, while it was open), and SQLite would "
                    f"replay it onto this file. Move {wal} and {real}-shm aside (they belong to the "
                    f"other file), then open it again")


# The file's name while open

class FileWatch:
    """Whether the store's path still names the file opened; once it does not, it never does again."""

    def __init__(self, path: str, real: str, file: Identity):
        self.path = path
        self.real = real
        self.file = file
        self.gone: Optional[StoreGone] = None

    def check(self) -> None:
        if self.gone is None:
            try:
                now: Optional[Identity] = Identity.of(os.stat(self.real))
            except FileNotFoundError:
                now = None
            if now == self.file:
                return
            self.gone = _gone(self.path, self.real, now)
            log.error("%s", self.gone)
        raise StoreGone(*self.gone.args)  # one of its own for each caller, whatever thread it is on


def _gone(path: str, real: str, now: Optional[Identity]) -> StoreGone:
    what = ("no longer there: it was deleted, or renamed" if now is None
            else "now another file: it was replaced, or another file was renamed over it")
    where = path if path == real else f"{path} (the file {real})"
    return StoreGone(f"the store {where} is {what}, while this process had it open. What is written to it "
                     f"from then on is not kept under that name, so tinystore writes nothing more to it (the "
                     f"write that found this out may have reached the file, with nobody told it did): open "
                     f"the store again where it is now")


# Registered processes

class Here:
    """What this process registers, and how it tells whether another registration is alive."""

    def __init__(self, file: Identity):
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self.pid_ns = _pid_namespace()
        self.file = file

    def row(self, now: float, lock: LockFile) -> tuple[Any, ...]:
        return (self.pid, self.host, now, self.file.dev, self.file.ino, lock.identity.dev, lock.identity.ino,
                self.pid_ns)

    def alive(self, row: tuple[Any, ...], lock: LockFile) -> bool:
        """Whether the process of a row of tinystore_processes may still be alive, on this file."""
        id, pid, host, file_dev, file_ino, lock_dev, lock_ino, pid_ns = row
        if file_dev is None:  # registered by an earlier version: its byte is in the lock file beside the name
            return lock.is_held(id)
        if Identity(file_dev, file_ino) != self.file:
            return False  # registered on another file, of which this one is a copy, or which this one replaced
        if Identity(lock_dev, lock_ino) == lock.identity:
            return lock.is_held(id)
        # Its byte is in a lock file no longer beside the store (deleted or replaced since it registered; a
        # live process moves to the new one at its next write): only a pid gone from this machine is dead.
        if host != self.host or pid_ns != self.pid_ns:
            return True
        return _pid_alive(pid)


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"  # a zombie: dead, not yet reaped
    except (OSError, IndexError):
        return True


# Forks

_backends: "weakref.WeakSet[Any]" = weakref.WeakSet()  # the backends open in this process
_inherited: set[Identity] = set()  # files a parent of this process had open when it forked


def opened(backend: Any) -> None:
    _backends.add(backend)


def closed(backend: Any) -> None:
    _backends.discard(backend)


def check_not_inherited(path: str, file: Identity) -> None:
    if file in _inherited:
        raise Error(
            f"cannot open the store {path} in this process: it was forked from a process that had the store "
            f"open, and SQLite's record of the locks that process held on the file was copied into this one, "
            f"so a connection opened here would not lock it. Open the store only in processes forked while "
            f"no parent has it open: close it before forking, or open it only in the children (gunicorn: "
            f"not at import with --preload; multiprocessing: the 'spawn' or 'forkserver' start method)")


def forked_error(path: str, parent: int) -> Error:
    return Error(f"the store {path} was opened in process {parent}, and this process was forked from it: a "
                 f"store cannot be used across a fork. Open the store in each process after the fork, in "
                 f"processes forked while no parent has it open (close it before forking)")


def _after_fork_in_child() -> None:
    _liveness.after_fork_in_child()
    for backend in list(_backends):
        _inherited.add(backend.file)
        for conn in backend.inherited_connections():
            _keep_for_ever(conn)
    _backends.clear()


def _keep_for_ever(obj: Any) -> None:
    """Never let ``obj`` be freed in this process: freeing a connection closes it."""
    _kept.append(obj)
    if _incref is not None:
        _incref(obj)


_kept: list[Any] = []
try:
    import ctypes

    def _incref(obj: Any) -> None:  # the list above is cleared when the interpreter ends; this is not
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
except ImportError:  # pragma: no cover - a Python without ctypes: kept until the interpreter ends
    _incref = None  # type: ignore[assignment]

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

