"""Hostile and broken bodies: only `DecodeError` ever escapes the decoders, and fast."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing_async._models.documents import (
    load_field_errors,
    load_list,
    load_model,
    load_sync_revisions,
)
from invoicing_async.errors import DecodeError
from invoicing_async.models import CurrentSession, Invoice, RecurringTemplate
from invoicing_async.testing import FakeInvoicingService
from invoicing_async.testing._writers import dump_list

pytestmark = pytest.mark.reliability

# A fuzz campaign: three times the profile's example count (tests/conftest.py). A generous
# deadline: a hang fails, a slow shared CI machine does not.
FUZZ = settings(
    max_examples=3 * settings().max_examples,
    deadline=5000,
    suppress_health_check=[HealthCheck.too_slow],
)
SAMPLE = FakeInvoicingService(invoices=3, seed=4)
VALID = {
    fmt: dump_list(list(SAMPLE.account.invoices.values()), fmt, Invoice) for fmt in ("xml", "json")
}


def decode_everything(body: bytes, fmt: str) -> None:
    """Every decoder a response can reach; anything but DecodeError fails the test."""
    for decode in (
        lambda: load_list(body, fmt, Invoice),  # type: ignore[arg-type]
        lambda: load_model(body, fmt, Invoice),  # type: ignore[arg-type]
        lambda: load_model(body, fmt, RecurringTemplate),  # type: ignore[arg-type]
        lambda: load_model(body, fmt, CurrentSession),  # type: ignore[arg-type]
        lambda: load_sync_revisions(body, fmt),  # type: ignore[arg-type]
    ):
        with contextlib.suppress(DecodeError):
            decode()
    load_field_errors(body, fmt)  # type: ignore[arg-type]  # never raises at all


@pytest.mark.parametrize("fmt", ["xml", "json"])
@FUZZ
@given(data=st.data())
def test_mutated_documents(fmt: str, data: st.DataObject) -> None:
    body = bytearray(VALID[fmt])
    for _ in range(data.draw(st.integers(1, 8))):
        if not body:
            break
        at = data.draw(st.integers(0, len(body) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if action == "flip":
            body[at] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del body[at:]
        elif action == "insert":
            body[at:at] = data.draw(
                st.sampled_from([b"<", b'"', b"{", b"]", b"&", b"\x00", b"99e9999"])
            )
        else:
            del body[at : at + data.draw(st.integers(1, 50))]
    decode_everything(bytes(body), fmt)


@pytest.mark.parametrize("fmt", ["xml", "json"])
@FUZZ
@given(body=st.binary(max_size=400))
def test_random_bytes(fmt: str, body: bytes) -> None:
    decode_everything(body, fmt)


TYPES = ["integer", "decimal", "float", "boolean", "date", "datetime", "dateTime", "array", "x"]


@FUZZ
@given(
    field=st.sampled_from(
        ["id", "total-paid", "invoice-date", "created-at", "details", "show-tax"]
    ),
    typ=st.sampled_from(TYPES),
    text=st.text(max_size=40).filter(lambda t: "<" not in t and "&" not in t),
)
def test_wrong_types_in_xml(field: str, typ: str, text: str) -> None:
    body = f'<invoice><{field} type="{typ}">{text}</{field}></invoice>'.encode()
    decode_everything(body, "xml")


@FUZZ
@given(
    field=st.sampled_from(
        ["id", "total_paid", "invoice_date", "created_at", "details", "show_tax"]
    ),
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=10,
    ),
)
def test_wrong_types_in_json(field: str, value: object) -> None:
    import json

    body = json.dumps({"invoice": {field: value}}).encode()
    decode_everything(body, "json")


@pytest.mark.parametrize("fmt", ["xml", "json"])
def test_deep_nesting_is_refused_not_a_crash(fmt: str) -> None:
    depth = 100_000
    body = b"<a>" * depth + b"</a>" * depth if fmt == "xml" else b"[" * depth + b"]" * depth
    with pytest.raises(DecodeError):
        load_list(body, fmt, Invoice)  # type: ignore[arg-type]


def test_huge_numbers_are_refused_quickly() -> None:
    with pytest.raises(DecodeError):
        load_model(
            b'<invoice><id type="integer">' + b"9" * 100_000 + b"</id></invoice>", "xml", Invoice
        )
    with pytest.raises(DecodeError):
        load_model(b'{"invoice": {"id": ' + b"9" * 100_000 + b"}}", "json", Invoice)
    with pytest.raises(DecodeError):
        load_model(b'{"invoice": {"total_paid": "' + b"9" * 100_000 + b'"}}', "json", Invoice)
