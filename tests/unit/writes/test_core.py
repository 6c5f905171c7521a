"""The decisions of keyed writes, without I/O: claims, fingerprints, and what a look means."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from invoicing_async import models as m
from invoicing_async._writes.core import (
    CLOCK_TOLERANCE,
    MAX_KEY_LENGTH,
    Intent,
    Record,
    Step,
    check_key,
    create_candidates,
    decide_claim,
    fingerprint,
    marker_match,
    on_service_clock,
    payment_applied,
    send_applied,
)
from invoicing_async.errors import IdempotencyKeyError

AT = 1_700_000_000.0


def intent(**changes: object) -> Intent:
    values: dict[str, object] = {
        "scope": "host",
        "key": "k",
        "kind": "send_invoice",
        "target": 42,
        "fingerprint": fingerprint("send_invoice", 42, b"body"),
        "detail": "email",
        "at": AT,
    }
    values.update(changes)
    return Intent(**values)  # type: ignore[arg-type]


def record(state: str = "pending", lease_until: float = AT + 600) -> Record:
    return Record(intent(), state, "owner", lease_until)  # type: ignore[arg-type]


def when(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)


def test_a_claim_replays_waits_or_settles() -> None:
    assert decide_claim(record("applied"), intent(), now=AT, owner_alive=True) is Step.REPLAY
    assert decide_claim(record(), intent(), now=AT, owner_alive=True) is Step.WAIT
    assert decide_claim(record(), intent(), now=AT, owner_alive=False) is Step.SETTLE
    assert decide_claim(record(), intent(), now=AT + 601, owner_alive=True) is Step.SETTLE


@pytest.mark.parametrize(
    "other",
    [
        {"fingerprint": fingerprint("send_invoice", 42, b"other body")},
        {"target": 43},
        {"kind": "send_reminder"},
    ],
)
def test_a_key_used_for_another_request_is_refused(other: dict[str, object]) -> None:
    with pytest.raises(IdempotencyKeyError, match="another request"):
        decide_claim(record("applied"), intent(**other), now=AT, owner_alive=True)


def test_fingerprints_tell_kind_target_and_body_apart() -> None:
    prints = {
        fingerprint("send_invoice", 1, b"a"),
        fingerprint("send_reminder", 1, b"a"),
        fingerprint("send_invoice", 2, b"a"),
        fingerprint("send_invoice", 1, b"b"),
        fingerprint("create_invoice", None, b"a"),
    }
    assert len(prints) == 5
    assert fingerprint("send_invoice", 1, b"a") == fingerprint("send_invoice", 1, b"a")


def test_keys_the_marker_cannot_hold_are_refused() -> None:
    check_key("x" * MAX_KEY_LENGTH)
    for bad in ["", "   ", "x" * (MAX_KEY_LENGTH + 1)]:
        with pytest.raises(IdempotencyKeyError):
            check_key(bad)


def test_create_candidates_are_new_ids_newest_first() -> None:
    revisions = {1: int(AT) - 500, 5: int(AT) - 900, 7: int(AT) + 1, 9: int(AT) + 3}
    assert create_candidates(revisions, 5, AT) == [9, 7]
    # No id known before: those changed since the intent (revisions are Unix seconds).
    assert create_candidates(revisions, None, AT) == [9, 7]
    assert create_candidates(revisions, 9, AT) == []


def test_the_intent_is_placed_on_the_service_clock() -> None:
    assert on_service_clock(AT, now=AT + 5, server_now=AT - 43_200) == AT - 43_205
    assert on_service_clock(AT, now=AT + 5, server_now=None) == AT


def test_a_marker_is_found_in_its_field() -> None:
    invoices = [m.Invoice(id=1, po_number="a"), m.Invoice(id=2, po_number="k")]
    assert marker_match(invoices, "po_number", "k") is invoices[1]
    assert marker_match(invoices, "description", "k") is None


def test_a_send_shows_as_a_history_record_newer_than_the_intent() -> None:
    def sent(action: str, at: float) -> m.Invoice:
        return m.Invoice(history=[m.InvoiceHistoryRecord(action=action, created_at=when(at))])

    assert send_applied(sent("invoice_sent_email", AT), reminder=False, send_method="email", at=AT)
    assert not send_applied(
        sent("invoice_sent_email", AT - CLOCK_TOLERANCE - 1),
        reminder=False,
        send_method="email",
        at=AT,
    )
    assert not send_applied(
        sent("invoice_sent_hand", AT), reminder=False, send_method="email", at=AT
    )
    reminded = sent("invoice_reminder_sent_post", AT + 1)
    assert send_applied(reminded, reminder=True, send_method="post", at=AT)
    assert not send_applied(reminded, reminder=False, send_method="post", at=AT)


def test_a_payment_shows_in_the_invoices_payments() -> None:
    wanted = m.InvoicePayment(price=Decimal("12.10"), payment_method="ideal")
    paid = m.Invoice(
        payments=[
            m.InvoicePayment(price=Decimal("12.1"), payment_method="ideal", created_at=when(AT))
        ]
    )
    assert payment_applied(paid, wanted, at=AT)
    assert not payment_applied(paid, wanted, at=AT + 60)  # an older payment of the same amount
    other = m.InvoicePayment(price=Decimal("12.10"), payment_method="paypal")
    assert not payment_applied(paid, other, at=AT)
