"""Whether a registered process is alive: a lock the kernel drops when it dies.

Each process that opens a store locks one byte of the store's lock file (the
byte at its registration id). A process that died, by SIGKILL or a power cut,
holds no lock, and a new process that reused its pid holds a different byte,
so a live process is never taken for a dead one nor the reverse.

POSIX record locks belong to the process and are all dropped when any of its
descriptors of the file is closed, so each process keeps exactly one
descriptor per lock file, for as long as it lives.
"""

from __future__ import annotations

import fcntl
import os
import threading

_lock = threading.Lock()
_files: dict[tuple[str, int], int] = {}  # (lock file path, pid) -> descriptor
_own: dict[tuple[str, int], set[int]] = {}  # the slots this process holds, which it cannot test


def _descriptor(path: str) -> int:
    key = (path, os.getpid())  # after a fork the child holds none of its parent's locks
    with _lock:
        fd = _files.get(key)
        if fd is None:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            _files[key] = fd
        return fd


def hold(path: str, slot: int) -> None:
    """Lock byte ``slot``: this process is alive under that registration."""
    fcntl.lockf(_descriptor(path), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
    with _lock:
        _own.setdefault((path, os.getpid()), set()).add(slot)


def release(path: str, slot: int) -> None:
    fcntl.lockf(_descriptor(path), fcntl.LOCK_UN, 1, slot)
    with _lock:
        _own.get((path, os.getpid()), set()).discard(slot)


def is_alive(path: str, slot: int) -> bool:
    """Whether a process holds byte ``slot``."""
    if slot in _own.get((path, os.getpid()), ()):
        return True  # a process's own locks never conflict with each other, so test by bookkeeping
    fd = _descriptor(path)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
    except OSError:
        return True
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, slot)
    return False
