"""Whether a registered process is alive: a lock the kernel drops when it dies.

Each registration (each open of a store) locks one byte of the store's lock
file, ``<store>-tinystore.lock``: the byte at its registration id. A process
that died, by SIGKILL or a power cut, holds no lock, and a new process that
reused its pid holds a different byte, so a live process is never taken for
a dead one nor the reverse.

The locks are Linux's open file description locks (``F_OFD_SETLK``): they
belong to the descriptor a registration opened, not to the process. Closing
another descriptor of the lock file (a backup copying it with the rest of
the store's folder from inside a worker, say) drops nothing, and two
registrations of one process see each other's bytes like any other
process's. After a fork the child's copy of the descriptor shares its
parent's lock; ``after_fork_in_child`` closes those copies, so that the
lock ends when the parent dies.

Where OFD locks do not exist (systems other than Linux), POSIX record locks
(``lockf``) stand in, with their limitation: they belong to the process,
and any close of any descriptor of the lock file in it drops them all, so
that the next open elsewhere would take its live registrations for dead.
Each process then keeps one descriptor per lock file for as long as it
lives; nothing in tinystore closes another, but the application must not
open and close the lock file (copying the store's folder from inside a
process that has it open does).

The lock file also records which store file it belongs to (``recorded``):
see ``_identity``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import sys
import threading
import weakref
from typing import NamedTuple, Optional

# Linux's values where the fcntl module does not name them (Python before 3.9 on Linux).
F_OFD_GETLK: Optional[int] = getattr(fcntl, "F_OFD_GETLK", 36 if sys.platform.startswith("linux") else None)
F_OFD_SETLK: Optional[int] = getattr(fcntl, "F_OFD_SETLK", 37 if sys.platform.startswith("linux") else None)
_FLOCK = struct.Struct("hhqqi")  # struct flock: l_type, l_whence, l_start, l_len, l_pid
_FLOCK_PAD = b"\0" * (-_FLOCK.size % struct.calcsize("q"))  # its padding on 64-bit systems
_WHOLE = 0  # l_len 0: from l_start to the end, however far the file grows
_RECORD = 64  # bytes at the start of the lock file where its store is recorded

# Whether OFD locks are used: None until the first lock file is opened tries them.
OFD: Optional[bool] = None if F_OFD_SETLK is not None else False


class Identity(NamedTuple):
    """A file as the kernel knows it, whatever its name: (st_dev, st_ino)."""

    dev: int
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> "Identity":
        return cls(st.st_dev, st.st_ino)


_lock = threading.Lock()
_open: "weakref.WeakSet[LockFile]" = weakref.WeakSet()  # this process's lock files, closed in a forked child
# Without OFD locks: one descriptor per lock file (by identity) and the bytes this process holds there,
# which it cannot test (its own POSIX locks never conflict with each other).
_posix_fds: dict[Identity, int] = {}
_posix_own: dict[Identity, set[int]] = {}


class LockFile:
    """One registration's descriptor of a store's lock file, created where it is missing."""

    def __init__(self, path: str, create: bool = True):
        global OFD
        self.path = path
        self.closed = False
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0) | getattr(os, "O_CLOEXEC", 0), 0o600)
        self.identity = Identity.of(os.fstat(fd))
        with _lock:
            if OFD is None:
                OFD = _ofd_works(fd)
            if not OFD:  # the process's one descriptor of this file: closing this one would drop its locks
                kept = _posix_fds.get(self.identity)
                if kept is None:
                    _posix_fds[self.identity] = fd
                else:
                    fd = kept  # the new one stays open too, for the same reason: it is simply never used
            self.fd = fd
            _open.add(self)

    @classmethod
    def existing(cls, path: str) -> "Optional[LockFile]":
        """The lock file, where there is one already."""
        try:
            return cls(path, create=False)
        except FileNotFoundError:
            return None

    def moved(self) -> bool:
        """Whether the lock file's name no longer leads to this file (deleted, or replaced)."""
        try:
            return Identity.of(os.stat(self.path)) != self.identity
        except FileNotFoundError:
            return True

    def hold(self, slot: int) -> bool:
        """Lock byte ``slot`` for this registration; False where another holds it."""
        if OFD:
            assert F_OFD_SETLK is not None  # OFD is true only where they exist
            try:
                fcntl.fcntl(self.fd, F_OFD_SETLK, _flock(fcntl.F_WRLCK, slot, 1))
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    return False
                raise
            return True
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        with _lock:
            _posix_own.setdefault(self.identity, set()).add(slot)
        return True

    def release(self, slot: int) -> None:
        if OFD:
            assert F_OFD_SETLK is not None  # OFD is true only where they exist
            fcntl.fcntl(self.fd, F_OFD_SETLK, _flock(fcntl.F_UNLCK, slot, 1))
            return
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, slot)
        with _lock:
            _posix_own.get(self.identity, set()).discard(slot)

    def is_held(self, slot: int) -> bool:
        """Whether another registration, of any process, holds byte ``slot``."""
        if OFD:
            return _held_ofd(self.fd, slot, 1)
        if slot in _posix_own.get(self.identity, ()):
            return True
        return _held_posix(self.fd, slot, 1)

    def any_held(self) -> bool:
        """Whether any registration holds a byte of this lock file."""
        if OFD:
            return _held_ofd(self.fd, 0, _WHOLE)
        return bool(_posix_own.get(self.identity)) or _held_posix(self.fd, 0, _WHOLE)

    def recorded(self) -> Optional[tuple[Identity, Identity]]:
        """The store file and the lock file this lock file was last recorded for, if it was."""
        words = os.pread(self.fd, _RECORD, 0).split()
        if len(words) != 6 or words[0] != b"tinystore" or words[1] != b"1":
            return None
        try:
            dev, ino, ldev, lino = map(int, words[2:])
        except ValueError:
            return None
        return Identity(dev, ino), Identity(ldev, lino)

    def record(self, store: Identity) -> None:
        """Record that this lock file belongs to the store file ``store``."""
        if self.recorded() == (store, self.identity):
            return
        text = f"tinystore 1 {store.dev} {store.ino} {self.identity.dev} {self.identity.ino}\n".encode()
        os.pwrite(self.fd, text.ljust(_RECORD - 1) + b"\n", 0)

    def close(self) -> None:
        """Let go of the descriptor: with OFD locks, every byte it held is released."""
        with _lock:
            if self.closed:
                return
            self.closed = True
            _open.discard(self)
            if OFD:
                os.close(self.fd)


def after_fork_in_child() -> None:
    """In a forked child: let go of the parent's lock files without touching the parent's locks.

    The child's copies of OFD descriptors would keep the parent's bytes locked
    after the parent died; closing them leaves the locks to the parent's own
    descriptors. POSIX locks are not inherited at all, and the child's close
    of its copy drops nothing of the parent's.
    """
    global _lock
    _lock = threading.Lock()  # another thread of the parent may have held it at the fork
    for lock_file in list(_open):
        if not lock_file.closed:
            lock_file.closed = True
            if OFD:
                _close_quietly(lock_file.fd)
    _open.clear()
    for fd in _posix_fds.values():
        _close_quietly(fd)
    _posix_fds.clear()
    _posix_own.clear()


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _flock(kind: int, start: int, length: int) -> bytes:
    return _FLOCK.pack(kind, os.SEEK_SET, start, length, 0) + _FLOCK_PAD


def _held_ofd(fd: int, start: int, length: int) -> bool:
    assert F_OFD_GETLK is not None  # called only where OFD locks exist
    answer = fcntl.fcntl(fd, F_OFD_GETLK, _flock(fcntl.F_WRLCK, start, length))
    return bool(_FLOCK.unpack(answer[:_FLOCK.size])[0] != fcntl.F_UNLCK)


def _held_posix(fd: int, start: int, length: int) -> bool:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start)
    except OSError:
        return True
    fcntl.lockf(fd, fcntl.LOCK_UN, length, start)
    return False


def _ofd_works(fd: int) -> bool:
    if F_OFD_GETLK is None:
        return False
    try:
        fcntl.fcntl(fd, F_OFD_GETLK, _flock(fcntl.F_WRLCK, 0, 1))
    except OSError:  # EINVAL: a kernel or a file system without them
        return False
    return True
