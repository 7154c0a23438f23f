"""The soak's PostgreSQL side: a private server to restart, and the server's own faults.

``PrivateServer`` is a cluster of the run's own, made with ``initdb`` in the
run's folder (``pg/data``; its log ``pg/server.log``), started with
``pg_ctl`` on a free port of 127.0.0.1 with ``fsync`` on (the default), and
restarted with ``pg_ctl restart -m fast`` or ``-m immediate`` (a crash: the
server recovers from its WAL when it starts again). ``remove`` stops it and
removes its data, whatever state it is in. Run as root, the binaries run as
the ``postgres`` user (PostgreSQL refuses to run as root), and the run's
folder is made traversable for that user.

The binaries are found on ``PATH``, else in the newest ``/usr/lib/postgresql/*/bin``.

``cut`` ends sessions of the store's database with ``pg_terminate_backend``:
those of one process (found by the ports of its TCP sockets, read from
``/proc``: whichever connections tinystore keeps, the writer's, the keeper's,
the readers' pool), or every one. ``holds_queue_lock`` says whether a stopped
process is in the middle of a write transaction, holding a queue's lock until
it runs again.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import time
from contextlib import closing
from typing import Optional

import psycopg

SERVER_USER = "postgres"  # who runs the server when the soak runs as root


def binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    for folder in reversed(dirs):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    raise FileNotFoundError(f"no {name} on PATH nor in /usr/lib/postgresql/*/bin")


def missing() -> Optional[str]:
    """Why a private server cannot be made here, or None."""
    try:
        for name in ("initdb", "pg_ctl"):
            binary(name)
    except FileNotFoundError as exc:
        return str(exc)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"run as root, the private server runs as the user {SERVER_USER!r}, which this machine has not"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateServer:
    def __init__(self, folder: str):
        self.home = os.path.join(folder, "pg")
        self.data = os.path.join(self.home, "data")
        self.log = os.path.join(self.home, "server.log")
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.user = SERVER_USER if os.geteuid() == 0 else None

    def _run(self, *args: str, timeout: float = 120) -> None:
        done = subprocess.run(list(args), user=self.user, cwd=self.home, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stdout}{done.stderr}"
                               f"\n{tail(self.log)}")

    def start(self) -> None:
        os.makedirs(self.home)
        if self.user is not None:
            shutil.chown(self.home, self.user, self.user)
            folder = os.path.dirname(self.home)
            os.chmod(folder, os.stat(folder).st_mode | 0o011)  # the server's user passes through to pg/
        self._run(binary("initdb"), "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
            conf.write(f"\n# the soak's\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                       f"unix_socket_directories = ''\nfsync = on\nmax_connections = 200\n"
                       # What made a write slow, in the log: a lock waited for past deadlock_timeout (1 s), with
                       # who held it; a statement that took the server 0.5 s or more.
                       f"log_lock_waits = on\nlog_min_duration_statement = 500\n")
        self._run(binary("pg_ctl"), "start", "-D", self.data, "-l", self.log, "-w", "-t", "60")

    def restart(self, mode: str) -> None:
        """``pg_ctl restart -m MODE``, waiting until the server accepts connections again."""
        self._run(binary("pg_ctl"), "restart", "-D", self.data, "-l", self.log, "-m", mode, "-w", "-t", "60")

    def remove(self) -> None:
        stop_left(os.path.dirname(self.home))


def stop_left(folder: str) -> None:
    """Stop the private server of the run's ``folder`` if one runs, and remove its data (the log stays)."""
    data = os.path.join(folder, "pg", "data")
    if os.path.exists(os.path.join(data, "postmaster.pid")):
        subprocess.run([binary("pg_ctl"), "stop", "-D", data, "-m", "immediate", "-w", "-t", "60"],
                       user=SERVER_USER if os.geteuid() == 0 else None, capture_output=True, timeout=90)
    shutil.rmtree(data, ignore_errors=True)


def tail(path: str, size: int = 1500) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def session_ports(pid: int) -> list[int]:
    """The local ports of process ``pid``'s TCP sockets (Linux): the client ports of its sessions."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return []
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[9] in inodes:
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def admin(server: str) -> psycopg.Connection:
    return psycopg.connect(server, autocommit=True, connect_timeout=10)


def cut(server: str, database: str, ports: Optional[list[int]] = None) -> int:
    """End the sessions of ``database`` (those of the client ``ports`` only, where given): how many."""
    with closing(admin(server)) as conn:
        if ports is None:
            rows = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                " WHERE datname = %s AND pid <> pg_backend_pid()", (database,)).fetchall()
        else:
            rows = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                " WHERE datname = %s AND client_port = ANY(%s)", (database, ports)).fetchall()
    return sum(1 for (ended,) in rows if ended)


def holds_queue_lock(server: str, database: str, ports: list[int], wait: float = 1.5) -> bool:
    """Whether a session of these client ports stays for ``wait`` seconds inside a transaction that holds an
    advisory lock: a stopped process's writer in the middle of a write, holding its queues' locks (and with
    them every other process's writer that waits for one of those queues) until it runs again."""
    deadline = time.monotonic() + wait
    with closing(admin(server)) as conn:
        while True:
            (holding,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity a WHERE a.datname = %s AND a.client_port = ANY(%s)"
                " AND a.xact_start IS NOT NULL AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid"
                " AND l.locktype = 'advisory' AND l.granted)", (database, ports)).fetchone()
            if not holding:
                return False
            if time.monotonic() >= deadline:
                return True
            time.sleep(0.1)


def server_version(server: str) -> str:
    with closing(admin(server)) as conn:
        return conn.execute("SHOW server_version").fetchone()[0]
