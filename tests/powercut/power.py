"""Power cuts: a disk that drops what was not synced, a PostgreSQL server on it, and one cut at a time.

``Disk`` is a folder on holdfs (``holdfs.py``): mounted, cut (what was not
synced is dropped, see holdfs) and mounted again. ``Server`` is a private
PostgreSQL cluster whose data directory is on that disk: started, killed with
SIGKILL (every process of it), recovered from what the disk kept. ``Rig``
runs one mode of ``child.py`` on a store on the disk, cuts the power at a
moment its seeded random chooses, and checks from a fresh process that
every write the child acknowledged is still there (see ``check``).

A cut: SIGKILL the child (and the server), then drop the disk's unsynced
writes and mount it again (the kernel's cache of it goes with the mount),
then start the server, which recovers from its WAL.
"""

from __future__ import annotations

import atexit
import glob
import json
import os
import pwd
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

HERE = Path(__file__).parent
HOLDFS = HERE / "holdfs.py"
CHILD = HERE / "child.py"
SERVER_USER = "postgres"  # who runs the server when the tests run as root (PostgreSQL refuses root)
MODES = ("add", "add_many", "threads", "transaction", "settle", "job04", "control")


def fuse_missing() -> Optional[str]:
    """Why holdfs cannot be mounted here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse (a container needs --device /dev/fuse and CAP_SYS_ADMIN)"
    if shutil.which("fusermount") is None:
        return "no fusermount on PATH (Debian: apt-get install fuse3 libfuse2)"
    try:
        import fuse  # noqa: F401  (fusepy loads libfuse.so.2 as it is imported)
    except (ImportError, OSError) as exc:
        return f"fusepy cannot load libfuse 2 ({exc}; pip install fusepy, apt-get install libfuse2)"
    return None


def server_missing() -> Optional[str]:
    """Why a private PostgreSQL server cannot be made here, or None."""
    try:
        for name in ("initdb", "postgres"):
            binary(name)
    except FileNotFoundError as exc:
        return str(exc)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"run as root, the server runs as the user {SERVER_USER!r}, which this machine has not"
    return None


def binary(name: str) -> str:
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))
    for folder in reversed(dirs):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"no {name} in /usr/lib/postgresql/*/bin nor on PATH")


def tail(path: Path, size: int = 2000) -> str:
    try:
        return path.read_bytes()[-size:].decode("utf-8", "replace")
    except OSError:
        return ""


class Disk:
    """A folder of files (``live``) mounted through holdfs at ``mount``."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.live = folder / "live"
        self.mount = folder / "mnt"
        self.log = folder / "holdfs.log"
        self.live.mkdir(mode=0o755)
        self.mount.mkdir()
        os.chmod(folder, 0o711)  # the server's user passes through to its data directory
        self.daemon: Optional[subprocess.Popen] = None

    def attach(self) -> None:
        with open(self.log, "ab") as log:
            self.daemon = subprocess.Popen([sys.executable, str(HOLDFS), str(self.live), str(self.mount)],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        deadline = time.monotonic() + 20
        while not mounted(self.mount):
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                self.detach()
                raise RuntimeError(f"holdfs did not mount {self.mount}: {tail(self.log)}")
            time.sleep(0.02)

    def cut(self) -> dict:
        """Drop every write not synced and mount what is left. Nothing may have a file of it open."""
        assert self.daemon is not None and self.daemon.stdin is not None and self.daemon.stdout is not None
        self.daemon.stdin.write("cut\n")
        self.daemon.stdin.flush()
        ready, _, _ = select.select([self.daemon.stdout], [], [], 120)
        answer = json.loads(self.daemon.stdout.readline() or '{"error": "holdfs ended"}') if ready else {
            "error": "no answer in 120 s"}
        self.detach()
        if "error" in answer:
            raise RuntimeError(f"holdfs could not cut: {answer['error']}\n{tail(self.log)}")
        self.attach()
        return answer

    def detach(self) -> None:
        """Unmount (the daemon then ends), lazily if something still has it open after a few tries."""
        if self.daemon is None:
            return
        for _ in range(50):
            if not mounted(self.mount):
                break
            if subprocess.run(["fusermount", "-u", str(self.mount)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["fusermount", "-uz", str(self.mount)], capture_output=True)
        try:
            self.daemon.wait(30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        self.daemon = None


def mounted(path: Path) -> bool:
    """Whether a file system is mounted at ``path`` (from the mount table: a stat of a cut one fails)."""
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1].replace("\\040", " ") == str(path) for line in mounts)


_template: Optional[Path] = None


def template_cluster() -> Path:
    """A cluster made by initdb once per process, off the disk (where it is quick), to copy onto disks."""
    global _template
    if _template is None:
        folder = Path(tempfile.mkdtemp(prefix="tinystore-pgtemplate-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        data = folder / "data"
        user = SERVER_USER if os.geteuid() == 0 else None
        if user is not None:
            shutil.chown(folder, user, user)
        done = subprocess.run([binary("initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                               "--no-sync"], user=user, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")
        with open(data / "postgresql.conf", "a") as conf:  # the defaults otherwise: fsync on, commits synced
            conf.write("\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 40\n")
        _template = data
    return _template


class Server:
    """A private PostgreSQL server whose data directory is ``pgdata`` on the disk."""

    def __init__(self, disk: Disk):
        self.disk = disk
        self.data = disk.mount / "pgdata"
        self.log = disk.folder / "server.log"
        self.user = SERVER_USER if os.geteuid() == 0 else None
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.proc: Optional[subprocess.Popen] = None

    def make(self) -> None:
        """Lay the cluster on the disk; before it is mounted, so all of it counts as synced."""
        shutil.copytree(template_cluster(), self.disk.live / "pgdata")
        if self.user is not None:
            for path in [self.disk.live / "pgdata", *(self.disk.live / "pgdata").rglob("*")]:
                shutil.chown(path, self.user, self.user)

    def start(self) -> None:
        import psycopg
        with open(self.log, "ab") as log:
            # A session of its own: a cut kills the postmaster and every backend of it at once.
            self.proc = subprocess.Popen([binary("postgres"), "-D", str(self.data), "-p", str(self.port)],
                                         user=self.user, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 90
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=5).close()
                return
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server on the disk did not start: {tail(self.log)}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL every process of the server, and wait until none lives."""
        if self.proc is None:
            return
        kill_group(self.proc.pid)
        self.proc.wait()
        self.proc = None


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while _group_lives(pgid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of group {pgid} still live 30 s after SIGKILL")
        time.sleep(0.01)


def _group_lives(pgid: int) -> bool:
    """Whether a process of group ``pgid`` lives (zombies do not: they hold no file open)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Tally:
    """What one mode's cuts found: acknowledged writes, and those a cut lost (by id)."""
    mode: str
    backend: str
    cuts: int = 0
    acknowledged: int = 0
    lost: set = field(default_factory=set)
    cuts_that_lost: int = 0
    torn: set = field(default_factory=set)  # transaction: a job without its row, or a row without its job
    dropped_pages: int = 0  # unsynced pages holdfs dropped, over every cut

    def line(self) -> str:
        torn = f", torn {len(self.torn)}" if self.mode == "transaction" else ""
        return (f"{self.backend} {self.mode}: {self.cuts} cuts, {self.acknowledged} acknowledged, "
                f"{len(self.lost)} lost (in {self.cuts_that_lost} cuts){torn}, "
                f"{self.dropped_pages} unsynced pages dropped")


class Rig:
    """A store on a disk that loses power: for SQLite a file on it, for PostgreSQL a server with its data on it."""

    def __init__(self, folder: Path, backend: str, seed: int):
        self.folder = folder
        self.backend = backend
        self.random = random.Random(seed)
        self.disk = Disk(folder)
        self.server = Server(self.disk) if backend == "postgres" else None
        self.rounds = 0

    @property
    def target(self) -> str:
        return self.server.url if self.server is not None else str(self.disk.mount / "store.db")

    def start(self) -> "Rig":
        if self.server is not None:
            self.server.make()
        self.disk.attach()
        if self.server is not None:
            self.server.start()
        return self

    def close(self) -> None:
        if self.server is not None:
            self.server.kill()
        self.disk.detach()

    def witness(self, mode: str) -> Path:
        """The mode's witness: on the machine's own disk, never cut."""
        return self.folder / f"witness-{mode}.txt"

    def run(self, mode: str, cuts: int) -> Tally:
        """``cuts`` rounds of: the child works, the power is cut, the store is checked against the witness."""
        tally = Tally(mode, self.backend)
        for _ in range(cuts):
            before = len(tally.lost)
            child = self._child(mode)
            try:
                self._wait_for_the_moment(mode, child)
            finally:
                kill_group(child.pid)
                child.wait()
            if self.server is not None:
                self.server.kill()
            tally.dropped_pages += self.disk.cut()["unsynced_pages"]
            if self.server is not None:
                self.server.start()
            self.check(mode, tally)
            tally.cuts += 1
            tally.cuts_that_lost += len(tally.lost) > before
        return tally

    def _child(self, mode: str) -> subprocess.Popen:
        self.rounds += 1
        log = open(self.folder / f"child-{self.rounds}.log", "wb")
        with log:
            return subprocess.Popen([sys.executable, str(CHILD), mode, self.target, str(self.witness(mode)),
                                     f"r{self.rounds}", str(self.random.randrange(1 << 30))],
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_for_the_moment(self, mode: str, child: subprocess.Popen) -> None:
        """Wait until the child has done what makes this cut worth making, then a random moment more."""
        if mode == "job04":  # right after a handler began: the claim's commit is the youngest
            kind, count, extra = "begin", self.random.randint(1, 3), self.random.uniform(0, 0.05)
        elif mode == "settle":
            kind, count, extra = "done", self.random.randint(1, 20), self.random.uniform(0, 0.2)
        else:
            kind, count, extra = "ack", self.random.randint(1, 30), self.random.uniform(0, 0.2)
        marker = f"ready r{self.rounds}\n"
        deadline = time.monotonic() + 60
        while True:
            text = self.witness(mode).read_text() if self.witness(mode).exists() else ""
            at = text.find(marker)
            if at >= 0 and sum(line.startswith(kind + " ") for line in text[at:].splitlines()) >= count:
                break
            if child.poll() is not None:
                raise RuntimeError(f"the {mode} child ended ({child.returncode}) before the cut: "
                                   f"{tail(self.folder / f'child-{self.rounds}.log')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {mode} child did not reach {count} {kind!r} in 60 s: "
                                   f"{tail(self.folder / f'child-{self.rounds}.log')}")
            time.sleep(0.005)
        time.sleep(extra)

    def check(self, mode: str, tally: Tally) -> None:
        """Read the store from a fresh process, and count each acknowledged write it no longer holds."""
        done = subprocess.run([sys.executable, str(CHILD), "check", self.target, mode],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"the check could not read the store: {done.stderr[-3000:]}")
        found = json.loads(done.stdout)
        jobs, rows = found["jobs"], set(found["rows"])
        witness = [line.split() for line in self.witness(mode).read_text().splitlines()]
        acked = [w[1] for w in witness if w[0] == "ack"]
        # Each fact once: a job seen done is said again by each later round's child.
        tally.acknowledged = len({tuple(w) for w in witness if w[0] in ("ack", "done", "begin")})
        tally.lost.update(("ack", i) for i in acked if i not in jobs)
        if mode == "transaction":
            tally.lost.update(("row", i) for i in acked if i not in rows)
            tally.torn.update(i for i in set(jobs) ^ rows)
        for w in witness:
            if w[0] == "done" and jobs.get(w[1], ["gone"])[0] != "done":
                tally.lost.add(("done", w[1]))
            if w[0] == "begin" and jobs.get(w[1], ["gone", 0])[1] < int(w[2]):
                tally.lost.add(("begin", w[1], int(w[2])))
