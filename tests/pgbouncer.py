"""A PgBouncer of a test's own, in transaction pooling mode, in front of the test server.

Debian's ``pgbouncer`` (``/usr/sbin/pgbouncer``, or ``PGBOUNCER`` in the environment) is started on a
free port of 127.0.0.1 with its config and auth file in a temporary folder (trust auth: the file names
the user and no password), pointing at the host and port of the test server's URL. Its pool holds
``pool_size`` server connections (3 by default: fewer than its clients, which then share them
transaction by transaction, as an application's processes share a pooler's few; with 2, the test
whose application holds its own transaction open through the pooler while two stores add waited
past the readers' pool timeout on some runs). It runs
in the foreground; ``close()`` ends it (SIGTERM) and removes the folder. Run as root, it is told to
switch to the ``postgres`` user, as PgBouncer refuses to run as root.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Optional

import psycopg
from psycopg.conninfo import conninfo_to_dict

BINARY = os.environ.get("PGBOUNCER", "/usr/sbin/pgbouncer")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PgBouncer:
    def __init__(self, server_url: str, pool_size: int = 3):
        params = conninfo_to_dict(server_url)
        self.dbname = params.get("dbname") or "postgres"
        self.folder = tempfile.mkdtemp(prefix="tinystore-pgbouncer-")
        self.port = _free_port()
        user = params.get("user") or "postgres"
        with open(os.path.join(self.folder, "userlist.txt"), "w") as f:
            f.write(f'"{user}" ""\n')
        with open(os.path.join(self.folder, "pgbouncer.ini"), "w") as f:
            f.write(f"""[databases]
{self.dbname} = host={params.get("host") or "127.0.0.1"} port={params.get("port") or 5432} dbname={self.dbname}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.folder}/userlist.txt
pool_mode = transaction
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
{"user = postgres" if os.geteuid() == 0 else ""}
""")
        self.log = open(os.path.join(self.folder, "pgbouncer.log"), "w+")
        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            [BINARY, os.path.join(self.folder, "pgbouncer.ini")], stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"postgresql://{user}@127.0.0.1:{self.port}/{self.dbname}?sslmode=disable"  # trust: no password
        self._wait_until_it_answers(server_url)

    def _wait_until_it_answers(self, server_url: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited ({self.proc.returncode}): {self.log_text()}")
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.close()
                    raise
                time.sleep(0.05)  # a poll for a process that says nothing when it listens

    def log_text(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)
