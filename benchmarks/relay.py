"""A TCP relay on 127.0.0.1 that holds every byte a fixed time each way: a network, on one machine.

    python benchmarks/relay.py --delay-ms 1 [--to 127.0.0.1:5432] [--port 0] [--record]

The kernel here has no netem, so the benchmarks make their own latency: a
client connects to the relay, the relay connects to the server, and each
chunk read from one side is written to the other ``delay`` seconds after it
was read (one thread per direction, each sleeping until its oldest chunk is
due; ``select`` and ``time.sleep`` wait to the microsecond, where asyncio's
epoll loop would round a wait up to the next millisecond). A query and its
answer thus cost two delays more than direct: the relay of 1 ms each way is
a server 2 ms away.

Because it sees every byte, the relay also counts what PostgreSQL's clients
send (frontend protocol v3): messages by type and **round trips**, a round
trip being each time the client sends after the server has spoken (so a
pipeline of statements sent before any answer is one). With ``record`` it
keeps each connection's statements (simple queries, and each Execute of the
extended protocol under the text of its Parse) with the round trip each was
sent in; ``transactions()`` groups them by BEGIN ... COMMIT.

Run as a program, it prints ``port N`` and then answers lines on stdin:
``mark`` prints ``counts {json}`` (every connection's counts, and statements
when recording, since the last mark) and starts anew; end of input closes it.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import select
import socket
import struct
import sys
import threading
import time
from typing import Any, Optional

_LONGEST = 1 << 30  # the protocol's longest message
_UNTYPED = {80877103, 80877104}  # SSLRequest, GSSENCRequest: answered by one byte, then the startup message


class _Frontend:
    """Reads what a PostgreSQL client sends, message by message: counts types and keeps statements."""

    def __init__(self, record: bool):
        self.record = record
        self.buffer = bytearray()
        self.startup = True
        self.prepared: dict[bytes, str] = {}  # statement name -> text (b"" is the unnamed one)
        self.bound: dict[bytes, str] = {}     # portal name -> text
        self.messages: collections.Counter[str] = collections.Counter()
        self.statements: list[tuple[int, str]] = []  # (round trip, text)
        self.broken = False

    def feed(self, data: bytes, trip: int) -> None:
        if self.broken:
            return
        self.buffer += data
        while True:
            if self.startup:
                if len(self.buffer) < 8:
                    return
                length, code = struct.unpack("!ii", self.buffer[:8])
                if not 8 <= length <= _LONGEST:
                    return self._not_postgresql()
                if len(self.buffer) < length:
                    return
                del self.buffer[:length]
                self.messages["startup"] += 1
                self.startup = code in _UNTYPED
                continue
            if len(self.buffer) < 5:
                return
            kind = chr(self.buffer[0])
            (length,) = struct.unpack("!i", self.buffer[1:5])
            if not 4 <= length <= _LONGEST:
                return self._not_postgresql()
            if len(self.buffer) < 1 + length:
                return
            body = bytes(self.buffer[5:1 + length])
            del self.buffer[:1 + length]
            self.messages[kind] += 1
            if self.record:
                self._statement(kind, body, trip)

    def _not_postgresql(self) -> None:
        """Bytes that are no message of the protocol: relayed all the same, no longer read."""
        self.broken = True
        self.buffer.clear()
        self.messages["unreadable"] += 1

    def _statement(self, kind: str, body: bytes, trip: int) -> None:
        if kind == "Q":
            self.statements.append((trip, body.split(b"\0", 1)[0].decode("utf-8", "replace")))
        elif kind == "P":
            name, rest = body.split(b"\0", 1)
            self.prepared[name] = rest.split(b"\0", 1)[0].decode("utf-8", "replace")
        elif kind == "B":
            portal, rest = body.split(b"\0", 1)
            self.bound[portal] = self.prepared.get(rest.split(b"\0", 1)[0], "?")
        elif kind == "E":
            self.statements.append((trip, self.bound.get(body.split(b"\0", 1)[0], "?")))


_EARLY = 0.0001  # a timed wait ends this long before a chunk is due; the rest is spent spinning
_TIMESTAMP = struct.Struct("@qq")  # struct timespec


def _received(sock: socket.socket) -> tuple[bytes, float]:
    """What ``sock`` has, and how long ago the kernel received it (SO_TIMESTAMPNS): a delay counted from
    the bytes' arrival, not from this thread's waking up to them."""
    data, ancillary, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(_TIMESTAMP.size))
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(value) >= _TIMESTAMP.size:
            seconds, nanoseconds = _TIMESTAMP.unpack(value[:_TIMESTAMP.size])
            return data, max(0.0, time.time() - (seconds + nanoseconds / 1e9))
    return data, 0.0


_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; SCM_TIMESTAMPNS has the same number


class _Link:
    """One client's connection and the relay's connection to the server, with what was counted on it."""

    def __init__(self, relay: "Relay", number: int, client: socket.socket, server: socket.socket):
        self.relay, self.number = relay, number
        self.client, self.server = client, server
        self.frontend = _Frontend(relay.record)
        self.lock = threading.Lock()
        self.trips = 0
        self.server_spoke = True  # the client's first bytes are a round trip
        self.bytes_up = self.bytes_down = 0
        self.done = 0
        self.threads = [threading.Thread(target=self._pump, args=(client, server, True), daemon=True,
                                         name=f"relay-{number}-up"),
                        threading.Thread(target=self._pump, args=(server, client, False), daemon=True,
                                         name=f"relay-{number}-down")]
        for thread in self.threads:
            thread.start()

    def _pump(self, src: socket.socket, dst: socket.socket, up: bool) -> None:
        """Read ``src``; write each chunk to ``dst`` once it is ``delay`` old; at ``src``'s end, close ``dst``'s side."""
        delay = self.relay.delay
        pending: collections.deque[tuple[float, bytes]] = collections.deque()
        open_ = True
        try:
            while open_ or pending:
                timeout = None if not pending else max(0.0, pending[0][0] - _EARLY - time.perf_counter())
                if open_ and select.select([src], [], [], timeout)[0]:
                    data, waited = _received(src)
                    if not data:
                        open_ = False
                    else:
                        pending.append((time.perf_counter() - waited + delay, data))
                        self._count(data, up)
                elif not open_:
                    time.sleep(timeout or 0.0)
                if pending and pending[0][0] - time.perf_counter() < _EARLY:
                    while time.perf_counter() < pending[0][0]:
                        pass  # the last few microseconds: a timed wait wakes some 50 us late here
                while pending and pending[0][0] <= time.perf_counter():
                    dst.sendall(pending.popleft()[1])
            dst.shutdown(socket.SHUT_WR)
        except OSError:  # either side reset, or the relay is closing: end both directions
            pass
        finally:
            self._end()

    def _count(self, data: bytes, up: bool) -> None:
        with self.lock:
            if up:
                self.bytes_up += len(data)
                if self.server_spoke:
                    self.trips += 1
                    self.server_spoke = False
                self.frontend.feed(data, self.trips)
            else:
                self.bytes_down += len(data)
                self.server_spoke = True

    def _end(self) -> None:
        with self.lock:
            self.done += 1
            both = self.done == 2
        if both:  # the other direction ends when its side closes too (a PostgreSQL server closes on EOF)
            for sock in (self.client, self.server):
                sock.close()
            self.relay._ended(self)

    def counts(self, reset: bool) -> dict[str, Any]:
        with self.lock:
            found = {"connection": self.number, "round_trips": self.trips, "bytes_up": self.bytes_up,
                     "bytes_down": self.bytes_down, "messages": dict(self.frontend.messages),
                     "statements": list(self.frontend.statements)}
            if reset:
                self.trips = 0
                self.bytes_up = self.bytes_down = 0
                self.frontend.messages.clear()
                self.frontend.statements.clear()
            return found

    def close(self) -> None:
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _fine_timers() -> None:
    """Ask Linux to wake this thread's timed waits on time (its default slack is 50 us): threads made after
    inherit it. Elsewhere, nothing."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK, 1 ns
    except (OSError, AttributeError):
        pass


class Relay:
    """Listens on ``host:port`` (0: a free port, read ``.port``), relays to ``to``, ``delay`` seconds each way."""

    def __init__(self, to: tuple[str, int], delay: float, host: str = "127.0.0.1", port: int = 0,
                 record: bool = False):
        self.to, self.delay, self.record = to, delay, record
        _fine_timers()
        self.listener = socket.create_server((host, port))
        self.host, self.port = self.listener.getsockname()[:2]
        self.links: list[_Link] = []
        self.ended: list[dict[str, Any]] = []  # counts of connections that closed since the last mark
        self.lock = threading.Lock()
        self.made = 0
        self.closing = False
        self.thread = threading.Thread(target=self._accept, daemon=True, name="relay-accept")
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self.to)
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            with self.lock:
                if self.closing:
                    client.close()
                    server.close()
                    return
                self.made += 1
                self.links.append(_Link(self, self.made, client, server))

    def _ended(self, link: _Link) -> None:
        counts = link.counts(reset=True)
        with self.lock:
            if link in self.links:
                self.links.remove(link)
                self.ended.append(counts)

    def mark(self) -> list[dict[str, Any]]:
        """Every connection's counts since the last mark (those that closed meanwhile too); counting starts anew."""
        with self.lock:
            links, ended, self.ended = list(self.links), self.ended, []
        return ended + [link.counts(reset=True) for link in links]

    def open_connections(self) -> int:
        with self.lock:
            return len(self.links)

    def close(self) -> None:
        """Stop listening, cut every connection, and wait for the relay's threads to end."""
        with self.lock:
            self.closing = True
            links = list(self.links)
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(5)
        for link in links:
            link.close()
        for link in links:
            for thread in link.threads:
                thread.join(5)

    def __enter__(self) -> "Relay":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# What the counts say

_KINDS = [  # (kind, a statement that makes a transaction one), first match wins
    # A cycle that settles claims in the same transaction: a settlement; one that only claims (or looks,
    # the statement that takes is sent either way), a claim cycle.
    ("settlement", re.compile(r"DELETE\s+FROM\s+\S+\.leases\b", re.I)),
    ("claim cycle", re.compile(r"INSERT\s+INTO\s+\S+\.leases\b", re.I)),
    ("renewal", re.compile(r"UPDATE\s+\S+\.leases\s+SET\s+expires\b", re.I)),
    ("add", re.compile(r"INSERT\s+INTO\s+\S+\.jobs\b", re.I)),
]


def transactions(statements: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """A connection's statements grouped by transaction (BEGIN ... COMMIT/ROLLBACK; a statement outside one
    is one of its own): each with its statements' texts and the round trips it took."""
    found: list[dict[str, Any]] = []
    current: Optional[dict[str, Any]] = None
    for trip, text in statements:
        word = text.lstrip().split(None, 1)[0].upper().rstrip(";") if text.strip() else ""
        if current is None:
            current = {"statements": [], "trips": set()}
        current["statements"].append(text)
        current["trips"].add(trip)
        if word in ("BEGIN", "START") and len(current["statements"]) == 1:
            continue
        if len(current["statements"]) == 1 or word in ("COMMIT", "ROLLBACK", "END"):
            found.append(current)
            current = None
    if current is not None:
        found.append(current)
    for txn in found:
        txn["round_trips"] = len(txn.pop("trips"))
        txn["kind"] = next((kind for kind, pattern in _KINDS
                            if any(pattern.search(s) for s in txn["statements"])), "other")
    return found


def by_kind(marked: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For each kind of transaction (add, claim cycle, settlement, renewal, other) in a mark's counts: how many,
    and their round trips and statements, mean and range."""
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for conn in marked:
        for txn in transactions(conn["statements"]):
            groups[txn["kind"]].append(txn)
    summary = {}
    for kind, txns in groups.items():
        trips = [t["round_trips"] for t in txns]
        sizes = [len(t["statements"]) for t in txns]
        summary[kind] = {"transactions": len(txns), "round_trips_mean": sum(trips) / len(trips),
                         "round_trips_min": min(trips), "round_trips_max": max(trips),
                         "statements_mean": sum(sizes) / len(sizes), "statements_max": max(sizes)}
    return summary


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", default="127.0.0.1:5432", help="the server: HOST:PORT")
    parser.add_argument("--delay-ms", type=float, required=True, help="milliseconds each byte is held, each way")
    parser.add_argument("--port", type=int, default=0, help="where to listen on 127.0.0.1 (0: a free port)")
    parser.add_argument("--record", action="store_true", help="keep every statement sent (for transactions())")
    args = parser.parse_args(argv)
    host, _, port = args.to.rpartition(":")
    relay = Relay((host, int(port)), args.delay_ms / 1000.0, port=args.port, record=args.record)
    print(f"port {relay.port}", flush=True)
    try:
        for line in sys.stdin:
            if line.strip() == "mark":
                print("counts " + json.dumps(relay.mark()), flush=True)
    finally:
        relay.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
