"""Round trips to the server (SPEC §7, "Round trips are the cost over a network"), counted on the wire.

Every connection of the store goes through the benchmarks' recording relay
(``benchmarks/relay.py``), which reads what the client sends: a round trip
is each time the client sends after the server answered, so statements sent
together (a pipeline) count once. Its transactions are named by what they
write (``relay.transactions``): an add inserts jobs, a claim cycle inserts
leases, a settlement deletes them, a renewal updates their expiry.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
from psycopg.conninfo import conninfo_to_dict

import tinystore
from tinystore.backends.postgres import _sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from relay import Relay, transactions  # noqa: E402

# A cycle's reads are sent together: the options with the leases it ends, then the take with the next
# times, then COMMIT with what it only writes (SPEC §7: at most three).
CLAIM_CYCLE = 3
SETTLEMENT = 3


@pytest.fixture
def relayed(pg: Any) -> Iterator[Any]:
    """A store of the test's schema whose every connection goes through a recording relay: ``(store, relay)``."""
    params = conninfo_to_dict(pg.url)
    host, port = params.get("host", "127.0.0.1"), int(params.get("port", 5432))
    with Relay((host, port), 0.0, record=True) as relay:
        url = f"postgresql://{params.get('user', 'postgres')}@127.0.0.1:{relay.port}/{params.get('dbname', 'test')}"
        store = tinystore.open(url, schema=pg.schema)
        try:
            yield store, relay
        finally:
            store.close()


def seen(relay: Relay, kind: str) -> list[dict[str, Any]]:
    """The transactions of one kind on every connection since the last look, each with its round trips."""
    return [t for conn in relay.mark() for t in transactions(conn["statements"]) if t["kind"] == kind]


def test_an_add_outside_the_applications_transaction_is_one_round_trip_with_its_notice(pg: Any, relayed: Any) -> None:
    store, relay = relayed
    queue = store.queue("trips")
    queue.add({"warm": True})
    listener = pg.connect(autocommit=True)  # a witness of the notices other processes hear
    listener.execute(f'LISTEN "{_sql.schema(pg.schema).channel}"')
    relay.mark()
    for n in range(5):
        queue.add({"n": n})
    queue.add_many([{"n": n} for n in range(5, 10)])
    adds = seen(relay, "add")
    assert [t["round_trips"] for t in adds] == [1] * 6
    assert all(len(t["statements"]) == 1 for t in adds)
    heard = [json.loads(n.payload) for n in listener.notifies(timeout=2, stop_after=6)]
    listener.close()
    assert [n["q"] for n in heard] == ["trips"] * 6
    assert sorted(job.payload["n"] for job in queue.jobs() if "n" in job.payload) == list(range(10))


def test_an_add_whose_id_is_kept_or_whose_job_has_a_group_runs_in_a_transaction_and_adds_as_before(relayed: Any) -> None:
    store, relay = relayed
    queue = store.queue("trips", keep=0)
    assert queue.add({"n": 1}, id="same").added
    relay.mark()
    again = queue.add({"n": 2}, id="same")
    assert not again.added and again.payload == {"n": 1}  # kept: the job already added (JOB-10)
    # The add alone found the id kept and wrote nothing; then its transaction: the insert that skips it,
    # the job read, COMMIT.
    assert [t["round_trips"] for t in seen(relay, "add")] == [1, 3]
    grouped = queue.add({"n": 3}, id="g", group="g1")
    assert grouped.added
    # BEGIN and the insert; the group's lock and row, the notice and COMMIT.
    assert [t["round_trips"] for t in seen(relay, "add")] == [2]
    assert [job.id for job in queue.jobs(limit=10)] == ["g", "same"]


def test_a_claim_cycle_and_a_settlement_take_a_bounded_number_of_round_trips(relayed: Any) -> None:
    store, relay = relayed
    queue = store.queue("trips")
    ran = []
    queue.work(lambda payload, run: ran.append(payload["n"]))
    queue.add({"n": 0})
    store.run_until_idle()
    relay.mark()
    queue.add({"n": 1})
    store.run_until_idle()
    assert ran == [0, 1]
    marked = relay.mark()
    cycles = [t for conn in marked for t in transactions(conn["statements"]) if t["kind"] == "claim cycle"]
    settlements = [t for conn in marked for t in transactions(conn["statements"]) if t["kind"] == "settlement"]
    # The cycle that took job 1, the one that settled it (and looked for more), and perhaps a last look.
    assert 1 <= len(cycles) <= 2 and len(settlements) == 1
    assert all(t["round_trips"] <= CLAIM_CYCLE for t in cycles), [t["statements"] for t in cycles]
    assert settlements[0]["round_trips"] <= SETTLEMENT, settlements[0]["statements"]
    # A statement sent with others: fewer round trips than statements.
    assert cycles[0]["round_trips"] < len(cycles[0]["statements"]) - 3


def test_a_renewal_is_one_round_trip(relayed: Any) -> None:
    store, relay = relayed
    queue = store.queue("trips", lease=0.4)
    running, release = threading.Event(), threading.Event()

    def hold(payload: Any, run: Any) -> None:
        running.set()
        release.wait(20)
    queue.work(hold)
    queue.add_many([{}, {}])
    store.start()
    try:
        assert running.wait(20)
        relay.mark()
        renewals: list[dict[str, Any]] = []
        for _ in range(200):
            renewals += seen(relay, "renewal")
            if len(renewals) >= 2:
                break
            threading.Event().wait(0.05)
    finally:
        release.set()
        store.stop()
    assert len(renewals) >= 2
    assert [t["round_trips"] for t in renewals] == [1] * len(renewals)
    assert all(len(t["statements"]) == 1 for t in renewals)


def test_an_add_whose_batch_names_an_id_twice_adds_it_once_all_or_nothing(relayed: Any) -> None:
    store, relay = relayed
    queue = store.queue("trips")
    relay.mark()
    # The add alone fails on the second "twice" (its id taken by the first, in the same statement) and
    # writes nothing; its transaction then adds as every add does.
    first, second, other = queue.add_many([tinystore.Job({"n": 1}, id="twice"), tinystore.Job({"n": 2}, id="twice"),
                                           tinystore.Job({"n": 3}, id="other")])
    assert (first.added, second.added, other.added) == (True, False, True)
    assert second.payload == {"n": 1}
    assert sorted((job.id, job.payload["n"]) for job in queue.jobs()) == [("other", 3), ("twice", 1)]
    assert len(seen(relay, "add")) == 2


def test_an_operations_error_in_a_batch_fails_that_operation_only(pg: Any, caplog: Any) -> None:
    # A batch runs in pipeline mode, where an error comes back with COMMIT; it then runs again one
    # statement at a time, each operation in a savepoint: the others commit, the one that failed alone
    # fails. The witness is a table of the test's own.
    store = pg.open()
    backend = store._backend  # noqa: SLF001 - the writer's batches, which no public call forms at will
    witness = f'"{pg.schema}".witness'
    with pg.connect(autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {witness} (n int PRIMARY KEY)")
    started, gate = threading.Event(), threading.Event()

    def hold(conn: Any) -> None:
        started.set()
        gate.wait(10)
    before = backend._writer.transactions  # noqa: SLF001
    busy = backend.submit(hold)
    assert started.wait(10)  # the writer's thread held: the next four are one batch
    ops = [backend.submit(lambda conn, n=n: conn.execute(f"INSERT INTO {witness} VALUES (%s)", (n,)))
           for n in (1, 2, 1, 3)]
    gate.set()
    busy.result(timeout=10)
    for n in (0, 1, 3):
        ops[n].result(timeout=10)
    with pytest.raises(tinystore.Error, match="duplicate key"):
        ops[2].result(timeout=10)
    assert pg.rows(f"SELECT n FROM {witness} ORDER BY n") == [(1,), (2,), (3,)]
    assert backend._writer.transactions == before + 2  # noqa: SLF001 - the four were one batch
    assert not [r for r in caplog.records if r.name.startswith("psycopg") and r.levelname == "WARNING"]


def test_a_limited_claim_commits_without_waiting_for_the_disk_and_a_durable_commit_comes_before_its_handler(
        relayed: Any) -> None:
    # JOB-04: the attempt is counted on the disk before the handler starts. The claim's transaction holds
    # the queue's lock, so it commits without waiting for the disk; a commit that waits for the disk, after
    # it and before the handler starts, takes the log to the disk up to and past it: a transactional log
    # message, which writes WAL (a transaction id drawn alone writes none, and its commit does not wait).
    store, relay = relayed
    queue = store.queue("limited", concurrency=1)
    before_handler: list[list[str]] = []
    queue.work(lambda payload, run: before_handler.append(
        [s for conn in relay.mark() for t in transactions(conn["statements"]) for s in t["statements"]]))
    queue.add({})
    relay.mark()
    store.run_until_idle()
    assert len(before_handler) == 1
    sent = before_handler[0]
    claim = next(n for n, s in enumerate(sent) if "INSERT INTO" in s and ".leases" in s)
    commit_async = max(n for n, s in enumerate(sent[:claim]) if "synchronous_commit = off" in s)
    assert "pg_advisory_xact_lock" in " ".join(sent[:commit_async])  # in the transaction under the lock
    flush = [n for n, s in enumerate(sent) if n > claim and "pg_logical_emit_message(true" in s]
    assert flush, sent[claim:]
    assert not any("synchronous_commit" in s for s in sent[flush[0]:])


def test_a_limited_claim_of_a_store_with_durability_normal_commits_as_its_session_does(pg: Any) -> None:
    # durability="normal" commits without waiting already: no flush follows a claim.
    params = conninfo_to_dict(pg.url)
    with Relay((params.get("host", "127.0.0.1"), int(params.get("port", 5432))), 0.0, record=True) as relay:
        url = f"postgresql://{params.get('user', 'postgres')}@127.0.0.1:{relay.port}/{params.get('dbname', 'test')}"
        store = tinystore.open(url, schema=pg.schema, durability="normal")
        try:
            queue = store.queue("limited", concurrency=1)
            ran = []
            queue.work(lambda payload, run: ran.append(1))
            queue.add({})
            relay.mark()
            store.run_until_idle()
            sent = [s for conn in relay.mark() for t in transactions(conn["statements"]) for s in t["statements"]]
        finally:
            store.close()
    assert ran == [1]
    assert not any("synchronous_commit" in s or "pg_logical_emit_message" in s for s in sent)
