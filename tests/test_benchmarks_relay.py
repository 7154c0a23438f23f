"""The benchmarks' latency relay (``benchmarks/relay.py``): it holds bytes its delay each way, passes them
intact both ways, closes cleanly, and counts PostgreSQL's round trips as the client makes them.

The delay is checked as a lower bound only (a relay of 50 ms each way cannot answer sooner than 100 ms):
how close it comes to its delay is measured in docs/benchmarks.md, not asserted here.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from relay import Relay, by_kind, transactions  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))


class EchoServer:
    """A TCP server on 127.0.0.1 that greets each client, then sends back every byte it gets, reversed in
    chunks of its own; ``ended`` is set when a client's connection reached its end at the server."""

    GREETING = b"hello from the server\n"

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.ended = threading.Event()
        self.received = bytearray()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            conn.sendall(self.GREETING)
            while data := conn.recv(65536):
                self.received += data
                conn.sendall(data)
            self.ended.set()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


def _read(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def _relay_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("relay-")]


def test_the_relay_passes_every_byte_both_ways_intact_and_in_order(echo: EchoServer) -> None:
    sent = os.urandom(3 * 1024 * 1024)
    with Relay(("127.0.0.1", echo.port), delay=0.001) as relay:
        with socket.create_connection(("127.0.0.1", relay.port)) as client:
            assert _read(client, len(EchoServer.GREETING)) == EchoServer.GREETING  # the server spoke first
            back = bytearray()
            reader = threading.Thread(target=lambda: back.extend(_read(client, len(sent))))
            reader.start()
            for first in range(0, len(sent), 100_000):  # writes of every size, the reader draining meanwhile
                client.sendall(sent[first:first + 100_000])
            reader.join(30)
    assert bytes(echo.received) == sent
    assert bytes(back) == sent


def test_the_relay_passes_bytes_that_are_no_postgresql_message_all_the_same(echo: EchoServer) -> None:
    # a startup message, then a message whose length is -1: the relay reads the protocol to count it
    garbage = struct.pack("!ii", 8, 196608) + b"Q" + struct.pack("!i", -1) + b"not the protocol"
    with Relay(("127.0.0.1", echo.port), delay=0.001, record=True) as relay:
        with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as client:
            assert _read(client, len(EchoServer.GREETING)) == EchoServer.GREETING
            client.sendall(garbage)
            assert _read(client, len(garbage)) == garbage
            client.sendall(b"and more")
            assert _read(client, 8) == b"and more"
        assert relay.mark()[0]["messages"]["unreadable"] == 1


def test_the_relay_holds_each_byte_its_delay_each_way(echo: EchoServer) -> None:
    with Relay(("127.0.0.1", echo.port), delay=0.050) as relay:
        with socket.create_connection(("127.0.0.1", relay.port)) as client:
            _read(client, len(EchoServer.GREETING))
            for _ in range(3):
                began = time.perf_counter()
                client.sendall(b"ping")
                assert _read(client, 4) == b"ping"
                assert time.perf_counter() - began >= 0.100  # 50 ms there, 50 ms back


def test_a_client_that_closes_ends_its_connection_at_the_server_and_in_the_relay(echo: EchoServer) -> None:
    with Relay(("127.0.0.1", echo.port), delay=0.001) as relay:
        client = socket.create_connection(("127.0.0.1", relay.port))
        client.sendall(b"last words")
        client.shutdown(socket.SHUT_WR)
        rest = _read(client, 1_000)  # the greeting, the echo, then the end of the stream: nothing is lost
        client.close()
        assert rest == EchoServer.GREETING + b"last words"
        assert echo.ended.wait(10)
        deadline = time.monotonic() + 10
        while relay.open_connections() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert relay.open_connections() == 0
        assert relay.mark()[0]["bytes_up"] == len(b"last words")  # a closed connection's counts are kept


def test_closing_the_relay_ends_its_connections_and_threads_and_frees_its_port(echo: EchoServer) -> None:
    relay = Relay(("127.0.0.1", echo.port), delay=0.001)
    clients = [socket.create_connection(("127.0.0.1", relay.port)) for _ in range(3)]
    for client in clients:
        assert _read(client, len(EchoServer.GREETING)) == EchoServer.GREETING
    relay.close()
    for client in clients:
        client.settimeout(10)
        try:
            assert client.recv(10) == b""
        except ConnectionResetError:
            pass
        client.close()
    assert _relay_threads() == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", relay.port), timeout=5).close()


ADMIN_URL = os.environ.get("TINYSTORE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture
def postgres_address() -> tuple[str, int]:
    psycopg = pytest.importorskip("psycopg")
    from psycopg.conninfo import conninfo_to_dict
    try:
        psycopg.connect(ADMIN_URL, connect_timeout=3).close()
    except psycopg.Error as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and no PostgreSQL server at {ADMIN_URL}: {exc}")
        pytest.skip(f"no PostgreSQL server at {ADMIN_URL}: {exc}")
    params = conninfo_to_dict(ADMIN_URL)
    return params.get("host") or "127.0.0.1", int(params.get("port") or 5432)


def test_the_relay_counts_a_postgresql_transaction_by_its_round_trips(postgres_address: tuple[str, int]) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(ADMIN_URL)
    with Relay(postgres_address, delay=0.0, record=True) as relay:
        url = make_conninfo(**{**params, "host": "127.0.0.1", "port": str(relay.port), "sslmode": "disable"})
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TEMPORARY TABLE jobs (n int)")
            relay.mark()
            conn.execute("BEGIN")
            conn.execute("INSERT INTO pg_temp.jobs VALUES (%s)", (1,))
            conn.execute("COMMIT")
            with conn.pipeline():  # three statements sent together: one round trip
                for n in range(3):
                    conn.execute("SELECT %s::int", (n,))
            marked = relay.mark()
    assert len(marked) == 1 and marked[0]["round_trips"] == 4
    txns = transactions(marked[0]["statements"])
    assert [(t["kind"], t["round_trips"], len(t["statements"])) for t in txns] == [
        ("add", 3, 3), ("other", 1, 1), ("other", 1, 1), ("other", 1, 1)]
    assert by_kind(marked)["add"]["round_trips_mean"] == 3
