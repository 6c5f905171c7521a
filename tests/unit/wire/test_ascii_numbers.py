"""Numbers as the service writes them, and nothing else: ASCII digits for money and ids
(Python's `int()` and `Decimal()` also take other scripts' digits and "_"), no negative
id in the sync list, and outgoing numbers held to the bounds incoming ones are."""

from __future__ import annotations

from decimal import Decimal

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._models.documents import load_model, load_sync_revisions
from invoicing_async.errors import DecodeError
from invoicing_async.testing import MockSender, OutgoingRequest, RawResponse, mock_response

ODD_DIGITS = ["١٢٣.٤٥", "６０.５０", "1_000.00"]


@pytest.mark.parametrize("text", ODD_DIGITS)
@pytest.mark.parametrize("fmt", ["xml", "json"])
def test_money_in_other_digits_is_refused(text: str, fmt: str) -> None:
    if fmt == "xml":
        body = f'<invoice><id type="integer">1</id><total-paid type="decimal">{text}</total-paid></invoice>'
    else:
        body = f'{{"invoice":{{"id":1,"total_paid":"{text}"}}}}'
    with pytest.raises(DecodeError, match=r"total_paid|decimal"):
        load_model(body.encode(), fmt, m.Invoice)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["６０", "١٢٣", "1_000"])
@pytest.mark.parametrize("fmt", ["xml", "json"])
def test_ids_in_other_digits_are_refused(text: str, fmt: str) -> None:
    if fmt == "xml":
        body = f'<invoice><id type="integer">{text}</id></invoice>'
        sync = f'<invoices><invoice><id type="integer">{text}</id><revision type="integer">1</revision></invoice></invoices>'
    else:
        body = f'{{"invoice":{{"id":"{text}"}}}}'
        sync = f'[{{"invoice":{{"id":"{text}","revision":1}}}}]'
    with pytest.raises(DecodeError):
        load_model(body.encode(), fmt, m.Invoice)  # type: ignore[arg-type]
    with pytest.raises(DecodeError):
        load_sync_revisions(sync.encode(), fmt)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fmt", "body"),
    [
        ("json", b'[{"invoice":{"id":1,"revision":5}},{"invoice":{"id":-7,"revision":5}}]'),
        ("json", b'[{"invoice":{"id":"-7","revision":5}}]'),
        (
            "xml",
            b'<invoices><invoice><id type="integer">-7</id><revision type="integer">5</revision>'
            b"</invoice></invoices>",
        ),
    ],
)
def test_a_negative_id_in_the_sync_list_is_refused(fmt: str, body: bytes) -> None:
    with pytest.raises(DecodeError, match="negative"):
        load_sync_revisions(body, fmt)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [
        {"discount": Decimal("1e999999999")},
        {"discount": Decimal("Infinity")},
        {"contact_id": 2**63},
        {"details": [m.InvoiceDetail(description="x", tax_rate_id=1, price=Decimal("1e-999"))]},
    ],
)
async def test_outgoing_numbers_get_the_bounds_of_incoming_ones(changes: dict[str, object]) -> None:
    sent: list[OutgoingRequest] = []

    def handler(request: OutgoingRequest) -> RawResponse:
        sent.append(request)
        return mock_response(200, b'{"invoice":{"id":42}}')

    async with ia.InvoicingClient(
        "https://acme.example.com",
        auth=ia.BasicAuth("u", "p"),
        format="json",
        sender=MockSender(handler),
        validate=False,  # a safety bound, not a rule of the service's
    ) as client:
        with pytest.raises(ia.ValidationError) as caught:
            await client.invoices.update(42, **changes)
    assert sent == []
    assert caught.value.errors[0].attribute is not None
