"""Typed payloads (SPEC §9): dataclasses and pydantic models in, instances out; a payload that no
longer fits fails its own job for good, and the queue goes on. On every backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Optional, Union

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
    got.sort(key=lambda signup: signup.user)  # def handlers of one claim run at once, in threads of their own
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
    (["user", 9], "it is a list, not an object for Signup"),
    ({"user": 9, "email": "c@example.com", "address": {"town": "Oslo"}}, "address has 'town', which Address has no field for"),
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


@dataclass
class Line:
    sku: str
    qty: int


@dataclass
class Bill:
    invoice_no: int
    total: float
    paid: bool
    note: Optional[str]
    lines: list[Line]
    taxes: dict[str, float] = field(default_factory=dict)
    kind: Literal["sale", "refund"] = "sale"
    ref: Union[int, str, None] = None
    sent: Optional[datetime] = None  # JSON carries no datetime: not checked, the value as it is
    extra: Any = None
    tags: list[str] = None  # type: ignore[assignment]  # a default of None takes null, whatever the type


BILL = {"invoice_no": 7, "total": 12, "paid": False, "note": None, "lines": [{"sku": "tea", "qty": 2}]}


def test_SPEC_9_a_dataclass_field_of_another_type_fails_the_job_for_good_naming_the_field_queue_and_job(
        store: tinystore.Store) -> None:
    q = store.queue("billing", attempts=5, dedupe="1h")
    runs: list[Any] = []

    @q.work
    def send(payload: Bill, run: tinystore.Run) -> None:
        runs.append(payload.invoice_no)

    q.add({**BILL, "invoice_no": "seven"}, id="inv-seven")
    q.add(BILL, id="inv-7")
    store.run_until_idle()
    bad = q.get("inv-seven")
    assert (bad.state, bad.attempt) == ("failed", 1)
    assert bad.error == ('the payload does not fit Bill: invoice_no is the string "seven", not an integer '
                         "(queue 'billing', job 'inv-seven')")
    assert (q.get("inv-7").state, runs) == ("done", [7])


@pytest.mark.parametrize("change, why", [
    ({"invoice_no": True}, "invoice_no is true, not an integer"),
    ({"invoice_no": 7.0}, "invoice_no is the number 7.0, not an integer"),
    ({"total": "12.50"}, 'total is the string "12.50", not a number'),
    ({"paid": 0}, "paid is the number 0, not true or false"),
    ({"note": 3}, "note is the number 3, not a string"),
    ({"lines": {"sku": "tea"}}, "lines is an object, not a list"),
    ({"lines": [{"sku": "tea", "qty": 2}, {"sku": "jam", "qty": "1"}]}, 'lines[1].qty is the string "1", not an integer'),
    ({"lines": [{"sku": "tea"}]}, "lines[0] lacks 'qty'"),
    ({"lines": [None]}, "lines[0] is null, not an object for Line"),
    ({"taxes": {"vat": "high"}}, "taxes['vat'] is the string \"high\", not a number"),
    ({"kind": "gift"}, 'kind is the string "gift", not one of "sale", "refund"'),
    ({"ref": 1.5}, "ref is the number 1.5, not an integer or a string or null"),
    ({"tags": ["a", 2]}, "tags[1] is the number 2, not a string"),
    ({"invoice_no": None}, "invoice_no is null, not an integer"),
])
def test_SPEC_9_each_field_type_json_carries_is_checked_and_a_misfit_names_its_field_path(
        store: tinystore.Store, change: dict, why: str) -> None:
    q = store.queue("billing", dedupe="1h")
    runs: list[Any] = []

    @q.work
    def send(payload: Bill, run: tinystore.Run) -> None:
        runs.append(payload)

    q.add({**BILL, **change}, id="bad")
    store.run_until_idle()
    bad = q.get("bad")
    assert bad.state == "failed" and runs == []
    assert bad.error == f"the payload does not fit Bill: {why} (queue 'billing', job 'bad')"


def test_SPEC_9_a_payload_that_fits_reaches_the_handler_as_the_types_its_fields_name(store: tinystore.Store) -> None:
    q = store.queue("billing")
    got: list[Bill] = []

    @q.work
    def send(payload: Bill, run: tinystore.Run) -> None:
        got.append(payload)

    q.add({**BILL, "taxes": {"vat": 2}, "kind": "refund", "ref": "r-1", "sent": "2026-12-01T10:00:00Z",
           "extra": {"any": ["thing"]}, "tags": None}, id="full")
    q.add(Bill(8, 1.5, True, "thanks", [Line("jam", 1)], ref=3, tags=["x"]), id="instance")
    store.run_until_idle()
    got.sort(key=lambda bill: bill.invoice_no)  # def handlers of one claim run at once, in threads of their own
    assert got == [
        Bill(7, 12.0, False, None, [Line("tea", 2)], {"vat": 2.0}, "refund", "r-1", "2026-12-01T10:00:00Z",  # type: ignore[arg-type]
             {"any": ["thing"]}, None),
        Bill(8, 1.5, True, "thanks", [Line("jam", 1)], ref=3, tags=["x"]),
    ]
    assert type(got[0].total) is float and type(got[0].taxes["vat"]) is float  # an int where a float is named
