"""Typed payloads (SPEC §9): dataclasses and pydantic models in, instances out; a payload that no
longer fits fails its own job for good, and the queue goes on. On every backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pydantic
import pytest

import tinystore


@dataclass
class Address:
    city: str
    zip: str


@dataclass
class Signup:
    user: int
    email: str
    address: Optional[Address] = None
    tags: list[str] = field(default_factory=list)


class Invoice(pydantic.BaseModel):
    number: int
    total: float
    lines: list[str] = []


def test_SPEC_9_a_dataclass_payload_is_stored_as_json_and_the_handler_gets_an_instance(
        store: tinystore.Store) -> None:
    q = store.queue("signups")
    got: list[Signup] = []

    @q.work
    def welcome(payload: Signup, run: tinystore.Run) -> None:
        got.append(payload)

    q.add(Signup(7, "a@example.com", Address("Oslo", "0150"), ["beta"]), id="s7")
    assert q.get("s7").payload == {"user": 7, "email": "a@example.com",
                                   "address": {"city": "Oslo", "zip": "0150"}, "tags": ["beta"]}
    q.add({"user": 8, "email": "b@example.com"}, id="s8")  # plain JSON of the same shape fits too
    store.run_until_idle()
    assert got == [Signup(7, "a@example.com", Address("Oslo", "0150"), ["beta"]), Signup(8, "b@example.com")]


def test_SPEC_9_a_pydantic_model_payload_reaches_an_async_handler_as_a_model(store: tinystore.Store) -> None:
    q = store.queue("invoices", dedupe="1h")

    @q.work
    async def send(payload: Invoice, run: tinystore.AsyncRun) -> Any:
        return {"sent": payload.number, "type": type(payload).__name__, "total": payload.total}

    q.add(Invoice(number=12, total=9.5, lines=["tea"]), id="i12")
    q.add({"number": "13", "total": 1}, id="i13")  # pydantic's own coercion applies
    store.run_until_idle()
    assert q.get("i12").result == {"sent": 12, "type": "Invoice", "total": 9.5}
    assert q.get("i13").result == {"sent": 13, "type": "Invoice", "total": 1.0}


@pytest.mark.parametrize("payload, why", [
    ({"user": 9, "mail": "c@example.com"}, "'mail', which Signup has no field for"),
    ({"user": 9}, "lacks 'email'"),
    (["user", 9], "list JSON, not an object"),
    ({"user": 9, "email": "c@example.com", "address": {"town": "Oslo"}}, "'town'"),
])
def test_SPEC_9_a_payload_that_no_longer_fits_fails_its_job_for_good_and_the_queue_goes_on(
        store: tinystore.Store, payload: Any, why: str) -> None:
    q = store.queue("signups", attempts=5, dedupe="1h")
    runs: list[int] = []

    @q.work
    def welcome(payload: Signup, run: tinystore.Run) -> None:
        runs.append(payload.user)

    q.add(payload, id="old")  # added before the type changed, say
    q.add(Signup(10, "d@example.com"), id="new")
    store.run_until_idle()
    old = q.get("old")
    assert (old.state, old.attempt) == ("failed", 1)  # for good at once: no attempt would make it fit
    assert old.error.startswith("the payload does not fit Signup: ") and why in old.error
    assert (q.get("new").state, runs) == ("done", [10])


def test_SPEC_9_a_pydantic_payload_that_no_longer_fits_says_which_field(store: tinystore.Store) -> None:
    q = store.queue("invoices")
    q.work(lambda payload, run: None)  # no annotation: plain JSON, any shape

    @q.work
    def send(payload: Invoice, run: tinystore.Run) -> None:
        pass

    q.add({"number": "twelve", "total": 1}, id="bad")
    store.run_until_idle()
    bad = q.get("bad")
    assert bad.state == "failed" and "does not fit Invoice" in bad.error and "number" in bad.error


def test_SPEC_9_a_handler_without_a_type_gets_plain_json(store: tinystore.Store) -> None:
    q = store.queue("plain")
    got: list[Any] = []
    q.work(lambda payload, run: got.append(payload))
    q.add(Signup(1, "e@example.com"), id="p")
    store.run_until_idle()
    assert got == [{"user": 1, "email": "e@example.com", "address": None, "tags": []}]
