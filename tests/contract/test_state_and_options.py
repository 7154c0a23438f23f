"""What a JobState holds once read, and the options a worker serves by: the store's, not the Queue object's."""

from __future__ import annotations

import pytest

import tinystore


def test_a_JobState_keeps_the_ahead_read_before_its_store_closed_and_one_first_read_after_raises_Closed(store):
    q = store.queue("line")
    q.add({}, id="first")
    counted = q.add({}, id="second")
    counted.ahead  # counted now, while the store is open
    uncounted = q.get("second")
    store.close()
    assert counted.ahead == 1
    with pytest.raises(tinystore.Closed) as closed:
        uncounted.ahead
    assert "closed" in str(closed.value) and "'line'" in str(closed.value) and "'second'" in str(closed.value)


def test_a_worker_claims_by_the_options_the_store_keeps_and_leaves_the_queue_objects_options_as_they_were(
        store, open_store, clock):
    q = store.queue("kept", attempts=5, keep="1h")

    @q.work
    def handler(payload, run):
        raise ValueError("it fails every time")

    open_store(clock=clock).queue("kept", attempts=1)  # another process keeps attempts=1 for every process
    q.add({}, id="a")
    store.run_until_idle()
    assert q.get("a").state == "failed"  # after one attempt: the kept option bound the claim
    assert q.options.attempts == 5  # what this process gave; nobody changed it behind its back
    q.reload()
    assert q.options.attempts == 1


SENT: list[str] = []


def send_mail(payload, run):
    SENT.append(f"{run.id} by send_mail")


def send_mail_again(payload, run):
    SENT.append(f"{run.id} by send_mail_again")


def test_a_second_handler_for_a_queue_is_refused_naming_the_queue_and_both_functions_and_the_first_stays(store):
    mail = store.queue("mail")
    mail.work(send_mail)
    with pytest.raises(tinystore.InvalidArgument) as refused:
        mail.work(send_mail_again)
    message = str(refused.value)
    assert refused.value.queue == "mail" and "'mail'" in message
    assert f"{__name__}.send_mail:" in message and f"{__name__}.send_mail_again is not registered" in message
    assert store.queue("mail").work(send_mail) is send_mail  # the same function again changes nothing
    SENT.clear()
    mail.add({}, id="m")
    store.run_until_idle()
    assert SENT == ["m by send_mail"]
