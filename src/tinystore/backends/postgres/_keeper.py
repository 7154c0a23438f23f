"""The connection a process keeps: its liveness lock and heartbeat, and what it hears of other processes' commits.

Liveness (DUR-03): a registration holds the session-level advisory lock
``(<liveness key of the schema>, owner id)`` on this connection, taken before
its ``processes`` row is committed, and says it lives every BEAT seconds
(``processes.alive``, by the server's clock). The server drops the lock when
the connection closes: at once when the process is killed (the kernel closes
its socket), and for a machine that vanished once the server notices its
connection is gone (TCP keepalives). But a connection also closes for a
moment when the network blips or a failover or an administrator ends it, and
the process connects again within a fraction of a second, its handlers
running all along: so a process whose lock is gone is found dead
(``end_dead``) only once it has not said it lives for GRACE seconds. A killed
process's leases end when its grace ends, at most GRACE seconds after it
died, not at the moment the server saw its connection close: a look that
finds it within its grace leaves it suspect (``dead_due``), and the process
that looked looks again as the grace ends (``tinystore._dead``).

A process that stays cut off cannot tell whether it was found dead: once its
last heartbeat began FENCE seconds ago (before GRACE, by this process's own
clock) it takes every attempt it runs away (``Notice(lost=True)``: its
handlers are told to stop, their answers settle nothing), as another process
may end its leases from then on. When this connection is made again, the lock
is taken again and the registration made again where another process found
it dead meanwhile and removed it, with its watches; a heartbeat that finds the
registration gone does the same. Either way it renews its leases at once
(``Notice(ended=True)``), not at its next renewal up to half a lease later:
every attempt whose lease was ended is taken away (another process may run
its job now); one it claimed since keeps its lease.

Hearing: the same connection LISTENs on the store's channel; a thread reads
``notifies()`` and tells each one as a ``Notice``: work for a queue, a job
cancelled (its handler stops, wherever it runs), or a watched job changed
(from the watch trigger). This process's own notices are skipped: they were
told at their commit. After the connection was lost and made again, it tells
``Notice(everything=True)``, as it may have missed some. Failures go to
``on_error``, which says how long to wait before trying again, or None to
stop telling (the lock is kept all the same).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import Any, Callable, Optional

import psycopg

from .._base import Notice, NoticeListener
from ._connection import Where, translated

log = logging.getLogger("tinystore.store")
POLL = 0.1  # seconds between looks at whether the keeper is closing
RETRY = 1.0  # longest wait between attempts to connect again while nobody listens
FIRST_RETRY = 0.05
# Seconds a process whose lock is gone is still taken for alive after its last heartbeat: it may be
# connecting again. Also the seconds after this process's own keeper connection was made again during
# which it finds no other process dead: a server restart drops every process's lock at once, for longer
# than a blip, and the live ones take theirs again within a moment of each other.
GRACE = 5.0
BEAT = 1.0  # seconds between heartbeats: well within GRACE, so that a moment cut off is not taken for death
FENCE = GRACE - 1.0  # seconds after its last heartbeat began by which a process cut off takes its attempts away
KEEPALIVES = (("tcp_keepalives_idle", 10), ("tcp_keepalives_interval", 5), ("tcp_keepalives_count", 3),
              ("tcp_user_timeout", 30000))


class Keeper:
    def __init__(self, connect: Callable[[], psycopg.Connection], q: Any, where: Where, owner: int,
                 registration: tuple[Any, ...], watching: Callable[[], list[int]] = list):
        self._connect = connect
        self._q = q
        self._where = where
        self.owner = owner
        self._registration = registration  # the processes row, made again after a reconnect if gone
        self._watching = watching  # the jobs this process watches, watched again with it
        self._on_notice: Optional[NoticeListener] = None
        self._on_error: Optional[Callable[[BaseException], Optional[float]]] = None
        self._closed = threading.Event()
        # Whether the registration is committed and not being removed (the backend sets it, after its
        # insert and before close removes it): only then is it said to be alive, or made again.
        self.registered = False
        self._lock = threading.Lock()
        self._unsettled_until = 0.0  # monotonic; inf while the connection is down (see GRACE)
        self._beat = time.monotonic()  # when the last heartbeat (or the registration) began
        self._fenced = False  # its attempts were taken away since that heartbeat (see FENCE)
        self._conn: Optional[psycopg.Connection] = self._open(again=False)  # raises at register
        self._thread = threading.Thread(target=self._loop, name="tinystore-pg-keeper", daemon=True)
        self._thread.start()
        # Apart from the connection's thread, which may wait on the network for long (a connect, a
        # statement to a server that vanished).
        self._fence = threading.Thread(target=self._fencing, name="tinystore-pg-fence", daemon=True)
        self._fence.start()

    def listen(self, on_notice: NoticeListener, on_error: Callable[[BaseException], Optional[float]]) -> None:
        self._on_error = on_error
        self._on_notice = on_notice

    def _open(self, again: bool) -> psycopg.Connection:
        q = self._q
        conn = self._connect()
        try:
            # The server notices a machine that vanished by its TCP keepalives on this connection: probed
            # after 10 s of silence, dropped (and with it the lock) some 25 s after the machine went, not
            # after the system's default of hours. Ignored over a Unix socket.
            for setting, value in KEEPALIVES:
                conn.execute(f"SET {setting} = {value}")
            # A heartbeat a second waits for no flush to disk: one lost in a crash of the server is lost
            # with every session, and each process says it lives again once it has connected again.
            conn.execute("SET synchronous_commit = off")
            conn.execute(q.live_lock, (q.live_key, self.owner))
            conn.execute(f'LISTEN "{q.channel}"')
            if again:
                self._say_alive(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _say_alive(self, conn: psycopg.Connection) -> None:
        """The heartbeat, with the lock held. No registration: it was found dead and removed meanwhile, and
        its leases ended; registered again with the watches of its watchers, which were removed with it
        (changes meanwhile are read by the refresh that Notice(everything=True) asks for), and told."""
        q = self._q
        began = time.monotonic()
        if not self.registered or conn.execute(q.process_alive, (self.owner,)).rowcount:
            self._beat, self._fenced = began, False
            return
        conn.execute(q.process_insert, self._registration)
        for seq in self._watching():
            conn.execute(q.watched_insert, (seq, self.owner))
        self._beat, self._fenced = began, False
        log.warning("this process (#%d) was found dead while its connection to %s was down, and its leases "
                    "ended: it registered again, and the handlers of the leases ended are told to stop",
                    self.owner, self._where.server())
        self._tell(Notice(ended=True))

    def close(self) -> None:
        """Stop, and let go of the connection: the liveness lock goes with it."""
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self._fence.join()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _fencing(self) -> None:
        """Once the last heartbeat began FENCE seconds ago, every attempt of this process is taken away
        (once per heartbeat missed): another process may find it dead from GRACE on, and end its leases."""
        while True:
            left = self._beat + FENCE - time.monotonic()
            if left <= 0 and not self._fenced:
                self._fenced = True
                log.warning("this process (#%d) could not say it lives to %s for %gs: its running handlers are "
                            "told to stop, as another process may soon find it dead and run their jobs",
                            self.owner, self._where.server(), FENCE)
                self._tell(Notice(lost=True))
            if self._closed.wait(left if left > 0 else POLL):
                return

    def _loop(self) -> None:
        lost = False
        delay = FIRST_RETRY / 2
        while not self._closed.is_set():
            try:
                if self._conn is None:
                    conn = self._open(again=True)
                    with self._lock:
                        if self._closed.is_set():
                            conn.close()
                            return
                        self._conn = conn
                    if lost:
                        lost = False
                        self._unsettled_until = time.monotonic() + GRACE
                        self._tell(Notice(everything=True))
                    delay = FIRST_RETRY / 2
                if time.monotonic() >= self._beat + BEAT:
                    self._say_alive(self._conn)
                for notify in self._conn.notifies(timeout=POLL):
                    self._heard(notify.payload)
            except Exception as exc:
                with self._lock:
                    if self._conn is not None:
                        try:
                            self._conn.close()
                        except psycopg.Error:
                            pass
                        self._conn = None
                if self._closed.is_set():
                    return
                lost = True
                self._unsettled_until = math.inf
                error = translated(exc, self._where, unknown="")
                # Soon: while its lock is not held, other processes may find this one dead after GRACE.
                wait = delay = min(RETRY, delay * 2)
                if self._on_error is not None and self._on_notice is not None:
                    told = self._on_error(error)
                    if told is None:
                        self._on_notice = None  # hearing stops; the liveness lock is taken again all the same
                    else:
                        wait = min(told, RETRY)  # the lock and heartbeat cannot wait for an outage's backoff
                else:
                    log.debug("the keeper connection failed: %s", error)
                self._closed.wait(wait)

    def unsettled_for(self) -> float:
        """Seconds until this process may judge others dead: 0 once its own connection has been up for
        GRACE; inf while it is down."""
        return max(0.0, self._unsettled_until - time.monotonic())

    def _tell(self, notice: Notice) -> None:
        on_notice = self._on_notice
        if on_notice is not None:
            on_notice(notice)

    def _heard(self, payload: str) -> None:
        if self._on_notice is None:
            return
        try:
            said = json.loads(payload)
        except ValueError:
            return
        if "w" in said:  # a watched job changed
            self._tell(Notice())
            return
        if said.get("o") is not None and said.get("o") == self.owner:
            return  # told at its commit
        queue = said.get("q")
        if "j" in said:
            self._tell(Notice(cancelled=frozenset([said["j"]])))
        elif queue is not None:
            self._tell(Notice({queue: None}))
