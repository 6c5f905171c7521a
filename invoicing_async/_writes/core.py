"""The decisions of a write that happens once, without I/O: what a journal record and a look
at the service mean (return the applied answer, send once more, or report not applied)."""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Literal, NamedTuple

from invoicing_async.errors import IdempotencyKeyError
from invoicing_async.models import Invoice, InvoicePayment

__all__ = [
    "CLOCK_TOLERANCE",
    "MAX_KEY_LENGTH",
    "Claim",
    "Intent",
    "Kind",
    "Record",
    "Step",
    "check_key",
    "create_candidates",
    "decide_claim",
    "fingerprint",
    "marker_match",
    "payment_applied",
    "send_applied",
]

Kind = Literal[
    "create_invoice", "send_invoice", "send_reminder", "register_payment", "create_template"
]
State = Literal["pending", "applied"]

#: The longest key: a Rails string column (po-number) holds 255 characters.
MAX_KEY_LENGTH = 255
#: Seconds of slack when a look compares the service's times (whole seconds: `Date`,
#: revisions, history and payment times) with the intent's time on the service's clock.
CLOCK_TOLERANCE = 2.0


class Intent(NamedTuple):
    """A keyed write as recorded before it is sent: what it is (kind, target, fingerprint of
    the body, `detail`: what a look compares, as JSON), when (wall-clock seconds), and the
    highest invoice id the journal knew then. (Named tuples: made on every keyed write, in
    one C call.)"""

    scope: str
    key: str
    kind: Kind
    target: int | None
    fingerprint: str
    detail: str
    at: float
    since_id: int | None = None

    def with_since(self, since_id: int | None) -> Intent:
        """This intent with the highest invoice id the journal knew when it was claimed."""
        if since_id == self.since_id:
            return self
        return tuple.__new__(Intent, (*self[:7], since_id))


class Record(NamedTuple):
    """An intent with its outcome: `pending` (sent or about to be; unknown), or `applied`
    with the answer document in the journal's format."""

    intent: Intent
    state: State
    owner: str
    lease_until: float
    result: bytes | None = None
    result_id: int | None = None


class Step(enum.Enum):
    """What to do with a key the journal was asked to claim."""

    SEND = "send"  # new: ours to send
    REPLAY = "replay"  # applied before: the same answer
    SETTLE = "settle"  # left pending by a writer that is gone: look first
    WAIT = "wait"  # another writer holds it now


class Claim(NamedTuple):
    step: Step
    record: Record


def check_key(key: str) -> None:
    """Refuse, before anything is sent, a key the marker field could not carry."""
    if not isinstance(key, str) or not key or not key.strip():
        raise IdempotencyKeyError("an idempotency key is a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise IdempotencyKeyError(
            f"idempotency key of {len(key)} characters: at most {MAX_KEY_LENGTH} (what the "
            "marker field holds); nothing was sent"
        )


def fingerprint(kind: Kind, target: int | None, body: bytes) -> str:
    """What makes two uses of a key the same request: kind, target and the body as sent."""
    digest = hashlib.blake2b(body, digest_size=16, person=kind.encode()[:16])
    digest.update(b"" if target is None else str(target).encode())
    return digest.hexdigest()


def decide_claim(existing: Record, intent: Intent, *, now: float, owner_alive: bool) -> Step:
    """A key already in the journal: refused when the request differs, else replayed,
    waited for, or settled by looking."""
    known = existing.intent
    if (known.kind, known.target, known.fingerprint) != (
        intent.kind,
        intent.target,
        intent.fingerprint,
    ):
        raise IdempotencyKeyError(
            f"idempotency key {intent.key!r} was used for another request ({known.kind}"
            f"{'' if known.target is None else f' of invoice {known.target}'}); "
            "nothing was sent"
        )
    if existing.state == "applied":
        return Step.REPLAY
    if owner_alive and existing.lease_until > now:
        return Step.WAIT
    return Step.SETTLE


def on_service_clock(at: float, *, now: float, server_now: float | None) -> float:
    """When an intent recorded at `at` (this machine's clock) happened on the service's clock,
    from the `Date` of a look's answer: the two clocks may differ by hours."""
    if server_now is None:
        return at
    return server_now - max(0.0, now - at)


def create_candidates(revisions: Mapping[int, int], since_id: int | None, at: float) -> list[int]:
    """Ids a create sent at `at` (the service's clock) may have made, newest first: those above
    the highest id known before it was sent; without one, those changed since (revision:
    Unix seconds)."""
    if since_id is not None:
        found = [i for i in revisions if i > since_id]
    else:
        floor = at - CLOCK_TOLERANCE
        found = [i for i, revision in revisions.items() if revision >= floor]
    found.sort(reverse=True)
    return found


def marker_match(models: Iterable[object], field: str, key: str) -> object | None:
    """The model carrying `key` in its marker field, if any."""
    for model in models:
        if getattr(model, field, None) == key:
            return model
    return None


def _after(when: dt.datetime | None, at: float) -> bool:
    return when is not None and when.timestamp() >= at - CLOCK_TOLERANCE


def send_applied(invoice: Invoice, *, reminder: bool, send_method: str, at: float) -> bool:
    """Whether the invoice shows the send (or reminder) of an intent made at `at` (the
    service's clock): its history record, newer than the intent."""
    action = f"invoice_{'reminder_' if reminder else ''}sent_{send_method}"
    return any(r.action == action and _after(r.created_at, at) for r in invoice.history)


def payment_applied(invoice: Invoice, payment: InvoicePayment, *, at: float) -> bool:
    """Whether the invoice holds a payment like `payment`, registered after the intent."""
    return any(
        _same_price(p.price, payment.price)
        and p.payment_method == payment.payment_method
        and (payment.payment_date is None or p.payment_date == payment.payment_date)
        and (p.created_at is None or _after(p.created_at, at))
        for p in invoice.payments
    )


def _same_price(a: Decimal | None, b: Decimal | None) -> bool:
    return a is not None and b is not None and a == b


def unsettled(records: Sequence[Record], *, now: float) -> list[Record]:
    """The pending records nobody holds any more (what `resolve_pending_writes` settles)."""
    return [r for r in records if r.state == "pending" and r.lease_until <= now]
