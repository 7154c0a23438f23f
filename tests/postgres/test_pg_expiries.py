"""Expiries on PostgreSQL: a claim cycle that ends leases which ran out passes over the ones another
transaction holds, instead of waiting for it.

Every process's claim cycles end the expired leases of a queue, under no lock. When each waited for the
rows another held, two cycles ending the same leases in different orders deadlocked; a soak saw a stopped
worker's leases run out, and then 25 s of deadlocks, one a second (the server's deadlock_timeout), during
which the writers of every worker stood still and more leases ran out.
"""

from __future__ import annotations

import kits
from tinystore.testing import FakeClock


def test_an_expiry_passes_over_a_lease_another_transaction_holds_and_a_later_cycle_ends_it(pg):
    clock = FakeClock()
    store = pg.open(clock=clock, lock_timeout="1s")
    q = store.queue("exp", lease="2s", backoff=("100ms", "100ms"))
    q.add({"n": 1}, id="held")
    kit = kits.kit_for(pg.url)
    assert [c.id for c in kit.claim_cycle(store, q, 1, clock.now()).claimed] == ["held"]
    clock.advance(5)  # its lease ran out
    with pg.connect() as other:
        # Another process's transaction holds the lease's row, as one that keeps a step of the attempt does.
        assert other.execute(f'SELECT 1 FROM "{pg.schema}".leases FOR SHARE').fetchall() == [(1,)]
        cycle = kit.claim_cycle(store, q, 1, clock.now())  # waited for `other` before: Locked after 1 s
        assert cycle.claimed == []
        assert q.get("held").state == "running"  # its lease is left to a later cycle
        other.rollback()
    clock.advance(1)  # past the backoff of the attempt the expiry ends
    assert [c.id for c in kit.claim_cycle(store, q, 1, clock.now()).claimed] == ["held"]
    assert q.get("held").attempt == 2
